"""Built-in checks, one module per stable check id (see docs/checks.md)."""
