"""Independent reference implementations, written from the metric definitions alone.

Slow on purpose and sharing no code with :mod:`audiorepro.metrics` (a test enforces that
neither imports the other). Auditors can read and run them to check the fast harness.
"""

from __future__ import annotations

from audiorepro.reference.retrieval import reference_retrieval_metrics

__all__ = ["reference_retrieval_metrics"]
