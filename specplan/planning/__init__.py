"""Answers a user acts on: recommend / capacity / launch commands / cost."""
