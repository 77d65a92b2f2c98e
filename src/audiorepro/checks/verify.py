"""Verify published values: recompute each from its dump and compare, cell by cell.

The published-values file is :mod:`audiorepro.specs.published`. Each value is PASS
(``|reproduced - published| <= tolerance``), FAIL, or NOT VERIFIED when its inputs are not
available here (never a pass).
"""

from __future__ import annotations

from pathlib import Path

from audiorepro.checks.verdict import FAIL as FAIL
from audiorepro.checks.verdict import NOT_VERIFIED as NOT_VERIFIED
from audiorepro.checks.verdict import NOTHING_CHECKED as NOTHING_CHECKED
from audiorepro.checks.verdict import PASS as PASS
from audiorepro.checks.verdict import TO_CHECK as TO_CHECK
from audiorepro.checks.verdict import Status as Status
from audiorepro.checks.verdict import Summary as Summary
from audiorepro.checks.verdict import ValueRow as ValueRow
from audiorepro.checks.verdict import Verdict as Verdict
from audiorepro.checks.verdict import check_failed as check_failed
from audiorepro.checks.verdict import recheck as recheck
from audiorepro.checks.verdict import settle as settle
from audiorepro.checks.verdict import summarize as summarize
from audiorepro.checks.verdict import value_rows as value_rows
from audiorepro.checks.verdict import verdict as verdict
from audiorepro.checks.verdict import verify_lines as verify_lines
from audiorepro.checks.verdict import within as within
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.metrics.profile_registry import is_canonical
from audiorepro.metrics.profiles import compute_profile, published_cutoffs
from audiorepro.metrics.retrieval import DIRECTIONS, TiePolicy, compute_retrieval, is_metric_name
from audiorepro.specs.published import PublishedCell


def verify_published(cells: list[PublishedCell], dumps_dir: str | Path) -> Summary:
    """One row per published value; ``passed`` only when every row passes."""
    rows: list[ValueRow] = []
    for cell in cells:
        path = Path(dumps_dir) / cell.dump
        reason = None
        reproduced: dict[str, float] = {}
        if not path.exists():  # a folder or FIFO there is bad input, refused by load_dump
            reason = f"dump {cell.dump} is not available in {dumps_dir}{how_to_make(cell, path)}"
        else:
            dump = load_dump(path)
            if cell.sha256 is not None and dump.sha256 != cell.sha256:
                reason = f"dump's sha256 {dump.sha256} differs from the recorded {cell.sha256}"
            elif cell.n_clips is not None and dump.n_clips != cell.n_clips:
                reason = f"dump has {dump.n_clips} clips, the published cell {cell.n_clips}"
            elif cell.n_captions is not None and dump.n_captions != cell.n_captions:
                reason = (
                    f"dump has {dump.n_captions} captions, the published cell {cell.n_captions}"
                )
            else:
                reproduced = compute_profile(
                    dump,
                    cell.profile,
                    tie_policy=cell.tie_policy,
                    cutoffs=published_cutoffs(cell.profile, list(cell.values), None),
                ).metrics
                if is_canonical(cell.profile):
                    reproduced |= _at_other_cutoffs(dump, cell.values, reproduced, cell.tie_policy)
        rows += value_rows(cell.dump, cell.values, cell.tolerance, reproduced, reason, cell.profile)
    return summarize(rows)


def _at_other_cutoffs(
    dump: Dump, values: dict[str, float], have: dict[str, float], tie_policy: TiePolicy
) -> dict[str, float]:
    """The published canonical values that the 1.0 report lacks (definitions 1.1: ``t2a/
    ndcg@50``, ``a2t/precision@3``, ...), each computed by name."""
    wanted = [key for key in values if key not in have]
    if not wanted:
        return {}
    result = compute_retrieval(dump)
    out: dict[str, float] = {}
    for key in wanted:
        direction, _, name = key.partition("/")
        if direction in DIRECTIONS and is_metric_name(name):
            out[key] = result.value(direction, name, tie_policy)
    return out


#: How a published cell's dataset is prepared: registry name (``fetch/datasets.py``), the
#: audio ``extract`` reads there, and what ``fetch`` needs besides ``--data``.
_DATASETS = {
    # One caption per clip, as the published AudioCaps values were computed: without the
    # selection fetch prepares all five, and that dump is NOT VERIFIED again after extraction.
    "audiocaps": (
        "audiocaps-test",
        "audio.txt",
        " --audio AUDIOCAPS_TEST_AUDIO --caption-selection first-id",
    ),
    "clotho": ("clotho-eval", "audio", ""),
}


def how_to_make(cell: PublishedCell, path: Path) -> str:
    """The commands that make a missing dump, for the reason a value is NOT VERIFIED.

    >>> cell = PublishedCell("d.npz", "canonical", "pessimistic", 0.0, {}, model="m",
    ...                      dataset="clotho5")
    >>> print(how_to_make(cell, Path("dumps/d.npz")))
    ; make it: audiorepro fetch m clotho-eval --data DATA, then audiorepro extract --model m \
--audio DATA/clotho-eval/audio --captions DATA/clotho-eval/captions.csv --out dumps/d.npz
    >>> audiocaps = PublishedCell("a.npz", "canonical", "pessimistic", 0.0, {}, model="m",
    ...                           dataset="audiocaps1")
    >>> "--audio AUDIOCAPS_TEST_AUDIO --caption-selection first-id," in how_to_make(
    ...     audiocaps, Path("a.npz"))
    True
    """
    kind = next((k for k in _DATASETS if (cell.dataset or "").startswith(k)), None)
    if kind is None or cell.model is None:
        return "; make it with audiorepro extract (docs/formats.md, Embedding dump format)"
    name, audio, extra = _DATASETS[kind]
    return (
        f"; make it: audiorepro fetch {cell.model} {name} --data DATA{extra}, then audiorepro "
        f"extract --model {cell.model} --audio DATA/{name}/{audio} --captions "
        f"DATA/{name}/captions.csv --out {path}"
    )
