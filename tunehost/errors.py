"""The one domain exception: the CLI turns it into a one-line error and exit status 1."""


class TunehostError(Exception):
    """One-line user-facing error; the CLI turns it into exit 1."""
