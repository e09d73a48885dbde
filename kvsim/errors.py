"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class KvsimError(Exception):
    """A user-facing error: bad scenario, bad trace, unknown model. The message is one line and names
    the file, key or line at fault."""
