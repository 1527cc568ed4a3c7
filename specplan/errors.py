"""The one error type users see: a single line naming the file, field and value."""


class SpecplanError(ValueError):
    """Bad input: printed by the CLI as one line, exit code 2."""
