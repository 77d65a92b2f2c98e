"""audiorepro: re-derive published audio-embedding benchmark numbers and prove they still hold."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
