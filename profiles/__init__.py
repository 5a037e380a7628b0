"""Tuning profiles as TOML data (see docs/profiles.md)."""
