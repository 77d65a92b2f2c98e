"""Third-party lines kept off audiorepro's stderr, filtered where they are made.

audiorepro's own runs print only audiorepro's lines (errors, notes and progress): a user reads
stderr for what went wrong, and lines from the libraries under a model say nothing about the
run. Each filter names the exact line it drops and is scoped to the call that makes it (never a
process-wide filter), so that a new warning from the same library still shows:

- torch's ``torch.meshgrid: in an upcoming release, it will be required to pass the indexing
  argument``: laion-clap's HTSAT builds its relative position index with ``torch.meshgrid``
  without ``indexing=``; the default (``"ij"``) is the one it needs, so the result is right.
- torchaudio's ``Argument 'onesided' has been deprecated and has no influence``: laion-clap's
  fused models build a ``MelSpectrogram(onesided=True)`` for each batch; the argument is
  ignored (one-sided is what the module computes), so nothing changes.
- laion-clap's ``print`` calls in ``CLAP_Module.load_ckpt`` (``Load the specified checkpoint
  PATH from users.``, ``Load Checkpoint...``) and while it builds its towers: they go to
  stdout, where audiorepro writes its own results, so the call's stdout is captured and
  dropped (the checkpoint path and its SHA-256 are in every run's manifest).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator

#: The warnings dropped inside :func:`quiet_model_library` (message regular expressions).
DROPPED_WARNINGS = (
    r"torch\.meshgrid: in an upcoming release, it will be required to pass the indexing",
    r"Argument 'onesided' has been deprecated and has no influence",
)


@contextlib.contextmanager
def quiet_model_library() -> Iterator[None]:
    """Inside: the warnings of :data:`DROPPED_WARNINGS` are ignored and stdout is captured
    and dropped (laion-clap's prints); every other warning is shown as before.

    >>> import sys, warnings
    >>> with quiet_model_library():
    ...     print("Load Checkpoint...")
    ...     warnings.warn("Argument 'onesided' has been deprecated and has no influence on x")
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with quiet_model_library():
    ...         warnings.warn("another warning")
    >>> [str(w.message) for w in seen]
    ['another warning']
    """
    with warnings.catch_warnings():
        for message in DROPPED_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        with contextlib.redirect_stdout(io.StringIO()):
            yield
