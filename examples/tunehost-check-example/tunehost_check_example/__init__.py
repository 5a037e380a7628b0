"""An example tunehost check package (see docs/plugins.md in the tunehost repository)."""
