"""Reproducibility tiers under other CPU code paths, on one machine (``tox -e crosscpu``).

Each variant reruns, in a fresh process with environment variables that make torch, oneDNN,
MKL, OpenBLAS or numpy take another code path: the fixture generator (``--check``), the
fixture dumps' metrics, the whole demo, and resemblyzer's real weights on the fixture speech.
Then: tier a values equal the golden files to the last bit, tier b values lie within their
recorded tolerances, the extraction cache keys and the probe demo are unchanged, the
extracted embeddings (the demo's and resemblyzer's) differ from the native run by less than
the stated ``EMBEDDING_REL_TOLERANCE``, and ``audiorepro diff`` of the variant's demo
against the native one is within tier (exit 0), every number of it; a number tampered past
its tolerance is still reported (exit 1). A variant that needs an instruction set this CPU
lacks is skipped, saying which.

Not part of the default run (a few minutes): selected with ``-m crosscpu``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.checks.tiers import EMBEDDING_REL_TOLERANCE
from audiorepro.runner.output.manifest import cpu_dispatch
from tests.conftest import DUMPS, GOLDEN, ROOT
from tests.goldens import compare_with_golden, demo_data, probe_data, with_legend

pytestmark = pytest.mark.crosscpu

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
# resemblyzer (extra speech) comes with the same lock: each variant extracts the fixture
# speech with it, and a missing one fails the variant rather than skipping it.

_NUMPY_AVX512 = (
    "AVX512F AVX512CD AVX512VL AVX512BW AVX512DQ AVX512VNNI AVX512IFMA AVX512VBMI "
    "AVX512VBMI2 AVX512BITALG AVX512VPOPCNTDQ AVX512FP16 "
    "AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
)


@dataclass(frozen=True)
class Variant:
    name: str
    env: dict[str, str]
    needs: str | None  # a numpy CPU feature name the variant's code path needs

    def missing(self) -> str | None:
        if self.needs is None or self.needs in cpu_dispatch()["numpy_cpu_features"]:
            return None
        return f"this CPU lacks {self.needs}, which variant {self.name} selects"


NATIVE = Variant("native", {}, None)
VARIANTS = (
    Variant("aten-default", {"ATEN_CPU_CAPABILITY": "default"}, None),
    Variant("aten-avx2", {"ATEN_CPU_CAPABILITY": "avx2"}, "AVX2"),
    Variant("aten-avx512", {"ATEN_CPU_CAPABILITY": "avx512"}, "AVX512_SKX"),
    Variant("onednn-avx2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "AVX2"),
    Variant("mkl-avx2", {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, "AVX2"),
    Variant("openblas-haswell", {"OPENBLAS_CORETYPE": "Haswell"}, "AVX2"),
    Variant("openblas-skylakex", {"OPENBLAS_CORETYPE": "SkylakeX"}, "AVX512_SKX"),
    Variant("numpy-no-avx512", {"NPY_DISABLE_CPU_FEATURES": _NUMPY_AVX512}, "AVX512F"),
)

_SCRIPT = """
import json, sys
from pathlib import Path
from audiorepro.cli import main
from audiorepro.runner.output.manifest import cpu_dispatch
out = Path(sys.argv[1])
rc = {"fixtures": {}}
rc["make_fixtures"] = __import__("subprocess").run(
    [sys.executable, "tools/make_fixtures.py", "all", "--check"], capture_output=True
).returncode
for dump in sys.argv[2:]:
    name = Path(dump).stem
    rc["fixtures"][name] = main(["metrics", dump, "--json", str(out / "fixtures" / f"{name}.json")])
rc["reproduce"] = main(["reproduce", "--out", str(out / "demo")])
rc["speech"] = main(["extract", "--model", "resemblyzer", "--audio", "fixtures/speech",
                     "--out", str(out / "speech.npz")])
rc["dispatch"] = cpu_dispatch()
(out / "variant.json").write_text(json.dumps(rc, sort_keys=True))
"""


def _run(variant: Variant, base: Path) -> Path:
    """Run the variant's work in a fresh process; returns its output folder."""
    out = base / variant.name
    (out / "fixtures").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in variant.env}
    env.update(variant.env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(out), *map(str, DUMPS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    (out / "log.txt").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"{variant.name} failed:\n{proc.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every runnable variant (and the native run), two processes at a time."""
    base = tmp_path_factory.mktemp("crosscpu")
    todo = [v for v in (NATIVE, *VARIANTS) if v.missing() is None]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outs = list(pool.map(lambda v: _run(v, base), todo))
    return {v.name: out for v, out in zip(todo, outs, strict=True)}


def _embeddings(out: Path) -> dict[str, np.ndarray]:
    arrays = {}
    for path in sorted((out / "demo" / "cache" / "dumps").glob("*.npz")):
        with np.load(path, allow_pickle=False) as z:
            for key in ("audio_embeds", "text_embeds"):
                arrays[f"{path.name}:{key}"] = z[key].astype(np.float64)
    return arrays


@pytest.mark.parametrize("variant", (NATIVE, *VARIANTS), ids=lambda v: v.name)
def test_tiers_hold_under_dispatch_variant(variant: Variant, runs: dict[str, Path]) -> None:
    reason = variant.missing()
    if reason is not None:
        pytest.skip(reason)
    out = runs[variant.name]
    record = json.loads((out / "variant.json").read_text())
    for key, value in variant.env.items():
        assert record["dispatch"]["variables"][key] == value  # the manifest sees the variant
    assert record["make_fixtures"] == 0, "the shipped fixtures are not bit-identical here"
    assert record["reproduce"] == 0 and set(record["fixtures"].values()) == {0}
    assert record["speech"] == 0, "resemblyzer on the fixture speech failed (extra speech)"

    problems: list[str] = []
    for path in DUMPS:
        report = json.loads((out / "fixtures" / f"{path.stem}.json").read_text())
        problems += compare_with_golden(
            with_legend(report), GOLDEN / "fixtures" / f"{path.stem}.yml"
        )
    problems += compare_with_golden(demo_data(out / "demo"), GOLDEN / "demo" / "demo.yml")
    problems += compare_with_golden(
        probe_data(out / "demo" / "probe"), GOLDEN / "demo" / "probe.yml"
    )
    assert problems == [], f"{variant.name}: " + "\n".join(problems)

    native = runs["native"]
    keys = sorted(p.name for p in (native / "demo" / "cache" / "dumps").glob("*.npz"))
    assert sorted(p.name for p in (out / "demo" / "cache" / "dumps").glob("*.npz")) == keys
    ours, theirs = _embeddings(out), _embeddings(native)
    for name, x in theirs.items():
        rel = np.linalg.norm(ours[name] - x, axis=1) / np.linalg.norm(x, axis=1)
        print(f"{variant.name} {name}: max relative difference {rel.max():.3g}")
        assert rel.max() <= EMBEDDING_REL_TOLERANCE, name
    _speech_within_tier_b(variant, out / "speech.npz", native / "speech.npz")
    if variant is not NATIVE:
        _diff_within_tier(variant, native / "demo", out / "demo")


def _diff_json(a: Path, b: Path, code: int) -> dict[str, Any]:
    """``audiorepro diff A B --json``, as a user runs it, with the exit code expected."""
    report = b.parent / f"diff-{a.parent.name}-{b.parent.name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "audiorepro", "diff", str(a), str(b), "--json", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                          os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert proc.returncode == code, proc.stdout[-6000:] + proc.stderr[-3000:]
    return dict(json.loads(report.read_text()))


def _diff_within_tier(variant: Variant, native: Path, ours: Path) -> None:
    """Issue 44: the whole demo, every number of it (the identity check's cosines and
    max-abs-diffs included), within its tier against the native run: ``diff`` exits 0 and
    every move is a tier-b number within its derived tolerance, caused by the machine."""
    doc = _diff_json(native, ours, 0)
    assert doc["verdict"] in ("identical", "within tier")
    moved = [n for n in doc["numbers"] if n["verdict"] != "identical"]
    print(f"{variant.name} diff: {doc['verdict']}, {len(moved)} of {len(doc['numbers'])} moved")
    for n in moved:
        assert n["tier"] == "b" and n["within_tier"] and n["delta"] <= n["tolerance"], n


def test_a_drift_beyond_its_tier_is_reported(runs: dict[str, Path], tmp_path: Path) -> None:
    """The tiers do not hide a real drift: in the demo of another CPU path, one identity
    number and one cell metric moved past their derived tolerance (the bundle re-hashed in
    the manifest, as a run that computed them would have written it) diff as changed
    (exit 1), each named, while the rest stays within tier."""
    import gzip
    import hashlib
    import shutil

    assert "aten-default" in runs  # no instruction set needed: it always runs
    base = runs["native"] / "demo"
    ours = tmp_path / "tampered" / "demo"
    shutil.copytree(runs["aten-default"] / "demo", ours)
    doc = _diff_json(base, runs["aten-default"] / "demo", 0)
    tolerance = {n["path"]: n["tolerance"] for n in doc["numbers"]}
    bundle = json.loads(gzip.decompress((ours / "bundle.json.gz").read_bytes()))
    block = bundle["verification"]["checkpoint_identities"][0]["embeddings"]
    identity = "verification/checkpoint_identities/0/embeddings/similarity_matrix_max_abs_diff"
    extracted = next(c for c in bundle["cells"] if "weights_sha256" in c["model_meta"])
    cell = f"{extracted['id']}/profiles/laion-clap/cumulative_loss"
    for path in (identity, cell):
        assert tolerance[path] is not None  # derived for both (0 where nothing moved)
    block["similarity_matrix_max_abs_diff"] += 1e-3  # 5e-4 is its tolerance at unit norms
    extracted["profiles"]["laion-clap"]["cumulative_loss"] += 1e-2
    (ours / "bundle.json.gz").write_bytes(
        gzip.compress(json.dumps(bundle, sort_keys=True).encode(), mtime=0)
    )
    manifest = json.loads((ours / "manifest.json").read_text())
    digest = hashlib.sha256((ours / "bundle.json.gz").read_bytes()).hexdigest()
    manifest["outputs"]["bundle.json.gz"] = digest
    (ours / "manifest.json").write_text(json.dumps(manifest))
    doc = _diff_json(base, ours, 1)
    beyond = {n["path"]: n for n in doc["numbers"] if not n["within_tier"]}
    assert set(beyond) == {identity, cell}, sorted(beyond)
    for n in beyond.values():
        assert n["verdict"] == "changed, explained" and n["delta"] > n["tolerance"]
        assert "run:hardware" in n["causes"]


def _speech_within_tier_b(variant: Variant, ours: Path, theirs: Path) -> None:
    """resemblyzer's real weights on the fixture speech (tests/test_speech_study.py): its
    embeddings within the tolerance of tier b, and the variant's EER within the interval that
    this tolerance allows, derived from the native scores.

    An embedding moved by a relative ``e`` turns by at most ``asin(e)``, so a cosine score
    moves by at most ``tau = 2 asin(e)`` (cos is 1-Lipschitz in the angle), plus the float64
    rounding of the cosine (1e-12 covers it). Any scores within ``tau`` of the native ones
    order every target/non-target pair at least as well as the native scores with targets
    raised by ``tau`` and non-targets lowered, and at most as well as the reverse; the EER
    (the ROC curve's crossing of FNR = FPR) only falls as the pairs' order improves, so it
    lies between the EERs of those two score sets. Only the pairs closer than ``2 tau`` can
    change order (their count is printed)."""
    import csv
    import math

    from audiorepro.formats.audio_dump import load_audio_dump
    from audiorepro.metrics.verification import equal_error_rate, speaker_trials

    a, b = load_audio_dump(ours), load_audio_dump(theirs)
    rel = np.linalg.norm(a.audio_embeds - b.audio_embeds, axis=1) / np.linalg.norm(
        b.audio_embeds, axis=1
    )
    with open(ROOT / "fixtures" / "speech" / "speakers.csv", newline="") as f:
        labels = {row["file_name"]: row["speaker"] for row in csv.DictReader(f)}
    trials = [speaker_trials(d.audio_embeds, [labels[c] for c in d.audio_ids]) for d in (a, b)]
    (ours_scores, target), (native, native_target) = trials
    assert np.array_equal(target, native_target)
    tau = 2 * math.asin(EMBEDDING_REL_TOLERANCE) + 1e-12
    low = equal_error_rate(np.where(target, native + tau, native - tau), target)
    high = equal_error_rate(np.where(target, native - tau, native + tau), target)
    eer = equal_error_rate(ours_scores, target)
    gaps = np.abs(native[target][:, None] - native[~target][None, :])
    print(
        f"{variant.name} speech: max relative difference {rel.max():.3g}, EER {eer} (native "
        f"{equal_error_rate(native, target)}; allowed {low} to {high}: "
        f"{int((gaps <= 2 * tau).sum())} target/non-target pairs can change order)"
    )
    assert rel.max() <= EMBEDDING_REL_TOLERANCE
    assert eer is not None and low is not None and high is not None
    assert np.all(np.abs(ours_scores - native) <= tau)  # what the interval rests on
    assert low <= eer <= high
