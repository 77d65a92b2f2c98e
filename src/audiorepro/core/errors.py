"""One error style for everything a user can get wrong.

A :class:`UserError` is a problem with the user's input (a file, a field, an option), not a bug
in audiorepro. The command line prints its one-line message and exits with code 2, without a
traceback. Messages name the file, the field and what was expected.
"""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input: reported as one line, exit code 2."""

    def __init__(self, message: str, *, source: str | Path | None = None, key: str | None = None):
        self.source = None if source is None else str(source)
        self.key = key
        where = ""
        if self.source is not None:
            where = f"{self.source}"
            if key is not None:
                where += f": key '{key}'"
            where += ": "
        elif key is not None:
            where = f"'{key}': "
        super().__init__(where + message)


def param_error(param: str, func: str, expected: str, got: object) -> UserError:
    """The one message format for a bad argument of a public function.

    >>> str(param_error("k", "recall_at_k", "an int >= 1", 0))
    "The 'k' parameter of recall_at_k must be an int >= 1. Got 0."
    """
    return UserError(f"The '{param}' parameter of {func} must be {expected}. Got {got!r}.")
