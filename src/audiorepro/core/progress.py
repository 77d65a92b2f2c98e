"""Progress on stderr: a tqdm bar on a terminal, plain stage lines in a log file.

On a terminal (stderr a TTY) a stage draws a tqdm bar when tqdm is installed (it comes with
the ``models`` extra only; a core install runs without bars rather than failing). When stderr
is a pipe or a file, a bar's carriage returns would litter the log, so a stage writes plain
lines instead: one when it starts (with its item count), one at each quarter of a stage of
at least :data:`MILESTONE_MIN` items, and one when it ends (count and seconds). Progress never
touches an output file; the seconds are in these lines only. ``AUDIOREPRO_PROGRESS=off``
turns both off (a log that should hold only what went wrong).

:func:`quiet_library_bars` turns off the bars that libraries (transformers, huggingface_hub,
anything built on tqdm) would draw into a log.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TextIO

#: A stage of at least this many items also writes a line at each quarter in a log.
MILESTONE_MIN = 20


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream: not a terminal
        return False


class StageLines:
    """Iterate ``items``, writing a stage's start, milestone and end lines to ``stream``.

    >>> import io
    >>> log = io.StringIO()
    >>> list(StageLines([1, 2], "metrics", "item", log, clock=lambda: 0.0))
    [1, 2]
    >>> print(log.getvalue(), end="")
    metrics: started, 2 items
    metrics: done, 2 items in 0.0 s
    """

    def __init__(
        self,
        items: Iterable[Any],
        label: str,
        unit: str,
        stream: TextIO,
        clock: Any = time.monotonic,
    ) -> None:
        self.items = items
        self.total = len(items) if isinstance(items, Sized) else None
        self.label = label.strip()
        self.unit = unit
        self.stream = stream
        self.clock = clock

    def __len__(self) -> int:
        return self.total if self.total is not None else 0

    def _say(self, text: str) -> None:
        self.stream.write(f"{self.label}: {text}\n")
        self.stream.flush()

    def _count(self, n: int) -> str:
        if n == 1:
            return f"{n} {self.unit}"
        return f"{n} {self.unit}{'es' if self.unit.endswith(('s', 'x', 'ch', 'sh')) else 's'}"

    def __iter__(self) -> Iterator[Any]:
        start = self.clock()
        total = self.total
        self._say(f"started, {self._count(total)}" if total is not None else "started")
        marks = {}
        if total is not None and total >= MILESTONE_MIN:
            marks = {total * q // 4: q * 25 for q in (1, 2, 3)}
        done = 0
        for item in self.items:
            yield item
            done += 1
            if done in marks:
                self._say(f"{marks[done]}% ({done}/{total})")
        self._say(f"done, {self._count(done)} in {self.clock() - start:.1f} s")


def progress_bar(items: Any, label: str, enabled: bool, unit: str = "batch") -> Any:
    """``items`` with progress on stderr when ``enabled``: a tqdm bar on a terminal (when
    tqdm is installed), :class:`StageLines` otherwise; ``items`` as is when not enabled or
    empty.

    >>> progress_bar([1, 2], "stage", enabled=False)
    [1, 2]
    """
    if not enabled or not len(items) or os.environ.get("AUDIOREPRO_PROGRESS") == "off":
        return items
    stream = sys.stderr
    if not _is_tty(stream):
        return StageLines(items, label, unit, stream)
    try:
        from tqdm import tqdm  # optional (models extra): the bar is a convenience only
    except ImportError:
        return items
    return tqdm(items, desc=label, unit=unit, file=stream, disable=False, leave=False)


def quiet_library_bars() -> None:
    """When stderr is not a terminal, turn off the progress bars of libraries: tqdm's own
    default (``TQDM_DISABLE``), huggingface_hub's and through it transformers' (set before
    they are imported; updated when they already are). A user's own setting is kept."""
    if _is_tty(sys.stderr):
        return
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    hub: Any = sys.modules.get("huggingface_hub.utils")
    if hub is not None and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1":
        hub.disable_progress_bars()
    logging: Any = sys.modules.get("transformers.utils.logging")
    if logging is not None and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1":
        logging.disable_progress_bar()
