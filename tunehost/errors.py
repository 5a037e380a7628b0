"""The one domain exception: the CLI turns it into a one-line error and exit status 1; and the one "try again
later" exit status every command shares."""

EXIT_BUSY = 75  # EX_TEMPFAIL: the host stayed busy (gate --wait-quiet, tune, history --drift); try again later


class TunehostError(Exception):
    """One-line user-facing error; the CLI turns it into exit 1."""
