"""Profiles: what a device and a model are (data in, validated)."""
