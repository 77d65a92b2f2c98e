#!/usr/bin/env bash
# The GPU checks of extraction, as one short script for a lent CUDA machine that has the model
# stack (torch, torchaudio, transformers, laion-clap) installed: builds the tiny models, extracts
# the fixture twice on cuda (the dumps must be byte-identical) and once on cpu (per-row cosine
# between cpu and cuda embeddings must exceed 0.9999). Skips, saying so, without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=src HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python3 -m pytest -q -rs -m gpu tests/test_models.py "$@"
