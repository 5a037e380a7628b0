"""Pure parsers of command output: str -> dataclasses; they never raise on garbage."""
