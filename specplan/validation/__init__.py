"""Validation reports: each a function behind a `specplan validate-*` command."""
