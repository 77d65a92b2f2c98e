"""Progress bars on stderr: tqdm when it is installed, nothing otherwise.

tqdm comes with the ``models`` extra only; a core install (``reproduce`` of a study of dumps)
runs without bars rather than failing. Bars never touch an output file.
"""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(items: Any, label: str, enabled: bool, unit: str = "batch") -> Any:
    """A tqdm bar on stderr when ``enabled``, stderr is a terminal and tqdm is installed; else
    ``items`` as is.

    >>> progress_bar([1, 2], "stage", enabled=False)
    [1, 2]
    """
    if not enabled or not len(items):
        return items
    try:
        from tqdm import tqdm  # optional (models extra): the bar is a convenience only
    except ImportError:
        return items
    return tqdm(items, desc=label, unit=unit, file=sys.stderr, disable=None, leave=False)
