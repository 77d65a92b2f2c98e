"""One error style for everything a user can get wrong.

A :class:`UserError` is a problem with the user's input (a file, a field, an option), not a bug
in audiorepro. The command line prints its one-line message and exits with code 2, without a
traceback. Messages name the file, the field and what was expected.
"""

from __future__ import annotations

import errno
from pathlib import Path

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


class UserError(ValueError):
    """Bad input: reported as one line, exit code 2. A ``ValueError``, so that a caller of
    the Python API catches a malformed argument as Python's own functions raise it (a code
    path that catches ``ValueError`` around a call that may raise this one must let it
    through: it already names the file or the argument)."""

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


class WriteError(UserError):
    """An output that cannot be written (full disk, file-size limit, quota, read-only file
    system, no permission): one line naming the file, exit 2, like any bad input. A subclass
    so that a stage which records a bad *input* as a failure still stops on it: a run that
    cannot write its outputs must not go on as if it had."""


#: The ``OSError`` numbers that mean "this output cannot be written here", and how each
#: message says why; every writer turns them into a :class:`WriteError` (:func:`write_error`).
WRITE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "the file would exceed the file-size limit (ulimit -f)",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def write_error(exc: OSError, path: str | Path | None = None) -> WriteError:
    """The one message for an output that cannot be written: the file, the reason, and that
    nothing was left behind under its name.

    >>> print(str(write_error(OSError(errno.ENOSPC, "No space left"), "out/t.csv"))[:60])
    out/t.csv: cannot be written: no space left on the device (n
    """
    where = path if path is not None else exc.filename
    reason = WRITE_ERRNOS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
    return WriteError(
        f"cannot be written: {reason} (nothing was written under this name; free space or "
        "choose another output path)",
        source=where,
    )


def param_error(param: str, func: str, expected: str, got: object) -> UserError:
    """The one message format for a bad argument of a public function.

    >>> str(param_error("k", "recall_at_k", "an int >= 1", 0))
    "The 'k' parameter of recall_at_k must be an int >= 1. Got 0."
    """
    return UserError(f"The '{param}' parameter of {func} must be {expected}. Got {got!r}.")
