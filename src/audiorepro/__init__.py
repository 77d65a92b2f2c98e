"""audiorepro: re-derive published audio-embedding benchmark numbers and prove they still hold.

The Python API (:mod:`audiorepro.api`) is available from the package itself:
``audiorepro.retrieval_metrics``, ``score_metrics``, ``parity``, ``explain``, ``load_dump``,
``reproduce``, ``verify`` and their result types. It is imported on first use, so that
``import audiorepro.core...`` in a worker or the command line does not load the whole runner.
"""

from __future__ import annotations

# typing is imported for the type checker only: it costs a megabyte of memory and 7 ms,
# and `audiorepro trec-eval` execs its native program from here (cli/entry.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

#: The names of :mod:`audiorepro.api`, re-exported here (kept equal by tests/test_api.py).
_API = (
    "Dump",
    "ExplainResult",
    "ParityResult",
    "RetrievalMetrics",
    "RunResult",
    "ScoreMetrics",
    "UserError",
    "VerifyResult",
    "explain",
    "load_dump",
    "parity",
    "reproduce",
    "retrieval_metrics",
    "score_metrics",
    "verify",
)

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        import audiorepro.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'audiorepro' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
