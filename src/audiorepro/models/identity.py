"""Is the checkpoint loaded now the one that produced a number? Weights first, then embeddings.

``compare`` loads two model specs and answers in three steps:

1. **Weights**, tensor by tensor under Hugging Face names (:mod:`audiorepro.models.mapping`; two
   laion-clap checkpoints are compared under their own names): identical, or the largest
   absolute difference and which tensors differ.
2. **Embeddings** of a fixture (clips and captions): per-clip audio cosine, per-caption text
   cosine, the correlation and largest absolute difference of the two caption x clip similarity
   matrices. Embeddings *match* when every cosine is at least :data:`MATCH_COSINE`.
3. **Verdict**: ``identical`` (same weights, matching embeddings); ``same weights,
   preprocessing differs`` (the weights are identical but the embeddings are not: every
   recorded setting in which the two sides differ is aligned in turn, and the one that brings
   every cosine to 1 is named); ``different checkpoints`` (the weights differ).

The block ``checkpoint_identity`` keeps the field names of the published verification output
(``text_embedding_cosine_per_clip`` holds one value per caption).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import UserError
from audiorepro.formats.audio import SAMPLE_RATE, read_audio
from audiorepro.formats.captions import load_inputs
from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.models.embedder import Embedder, load_embedder, require_text
from audiorepro.models.identity_block import IdentityBlock
from audiorepro.models.mapping import is_hf_only
from audiorepro.models.pipelines import Pipeline, configure_determinism
from audiorepro.models.registry import ModelSpec
from audiorepro.specs.settings import differing
from audiorepro.synthetic.audio import IDENTITY_CLIPS, IDENTITY_FIXTURE, build

#: Embeddings match when every per-clip and per-caption cosine is at least this.
MATCH_COSINE = 0.99999
IDENTICAL = "identical"
PREPROCESSING = "same weights, preprocessing differs"
DIFFERENT = "different checkpoints"

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Fixture:
    name: str
    clip_ids: tuple[str, ...]
    waveforms: tuple[npt.NDArray[np.float32], ...]
    captions: tuple[str, ...]
    caption_clip: tuple[int, ...]


def load_fixture(audio: Path | None, captions: Path | None) -> Fixture:
    """The given clips and captions, or the bundled synthetic fixture (five clips <= 10 s)."""
    if (audio is None) != (captions is None):
        raise UserError("give both --audio and --captions, or neither (bundled fixture)")
    if audio is None or captions is None:
        with tempfile.TemporaryDirectory(prefix="audiorepro-fixture-") as tmp:
            build(Path(tmp), IDENTITY_CLIPS)
            fixture = load_fixture(Path(tmp), Path(tmp) / "captions.csv")
        return Fixture(IDENTITY_FIXTURE, *(getattr(fixture, f) for f in _FIELDS))
    checked = load_inputs(captions, audio)  # every clip and caption checked before decoding
    caps, paths = checked.captions, checked.paths
    return Fixture(
        name=captions.parent.name or str(captions),
        clip_ids=caps.clips,
        waveforms=tuple(read_audio(p) for p in paths),
        captions=caps.texts,
        caption_clip=caps.clip_index,
    )


_FIELDS = ("clip_ids", "waveforms", "captions", "caption_clip")


def _rowwise_cosine(a: Array, b: Array) -> list[float]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    dots = np.einsum("ij,ij->i", a64, b64)
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    return [float(x) for x in dots / norms]


def _max_norm(a: Array, b: Array) -> float:
    """The largest norm of a row of either embedding matrix."""
    return float(max(np.linalg.norm(x.astype(np.float64), axis=1).max() for x in (a, b)))


def compare_embeddings(
    a_audio: Array, a_text: Array, b_audio: Array, b_text: Array
) -> dict[str, Any]:
    """Per-row cosines and similarity-matrix agreement of two embeddings of one fixture."""
    if a_audio.shape != b_audio.shape or a_text.shape != b_text.shape:
        return {
            "comparable": False,
            "reason": f"shapes differ: audio {a_audio.shape} vs {b_audio.shape}, "
            f"text {a_text.shape} vs {b_text.shape}",
            "matched": False,
        }
    audio_cos = _rowwise_cosine(a_audio, b_audio)
    text_cos = _rowwise_cosine(a_text, b_text) if a_text.size else []
    corr: float | None = None
    sim_diff: float | None = None
    sim_std: float | None = None
    if a_text.size:  # an audio-only encoder has no similarity matrix
        sim_a = a_text.astype(np.float64) @ a_audio.astype(np.float64).T
        sim_b = b_text.astype(np.float64) @ b_audio.astype(np.float64).T
        if sim_a.size > 1 and np.std(sim_a) > 0 and np.std(sim_b) > 0:
            corr = float(np.corrcoef(sim_a.ravel(), sim_b.ravel())[0, 1])
        sim_diff = float(np.max(np.abs(sim_a - sim_b)))
        sim_std = float(min(np.std(sim_a), np.std(sim_b)))
    worst = min(audio_cos + text_cos)
    # the scale of these numbers' tolerances under another CPU (checks.tiers.comparison_tolerance)
    scale = {
        "audio_max_norm": _max_norm(a_audio, b_audio),
        "text_max_norm": _max_norm(a_text, b_text) if a_text.size else 0.0,
        "similarity_matrix_std": sim_std,
    }
    return scale | {
        "comparable": True,
        "audio_embedding_cosine_per_clip": audio_cos,
        "text_embedding_cosine_per_clip": text_cos,
        "similarity_matrix_correlation": corr,
        "similarity_matrix_max_abs_diff": sim_diff,
        "audio_max_abs_diff": float(np.max(np.abs(a_audio.astype(np.float64) - b_audio))),
        "text_max_abs_diff": (
            float(np.max(np.abs(a_text.astype(np.float64) - b_text))) if a_text.size else 0.0
        ),
        "min_cosine": worst,
        "matched": bool(worst >= MATCH_COSINE),
    }


def compare_weights(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Tensor-by-tensor comparison of two state dicts under the same names."""
    import torch

    shared = sorted(set(a) & set(b))
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    differing: list[dict[str, Any]] = []
    shape_mismatch: list[str] = []
    max_abs = 0.0
    for name in shared:
        ta, tb = a[name], b[name]
        if tuple(ta.shape) != tuple(tb.shape):
            shape_mismatch.append(name)
            continue
        if torch.equal(ta, tb):
            continue
        diff = float((ta.double() - tb.double()).abs().max()) if ta.numel() else 0.0
        max_abs = max(max_abs, diff)
        differing.append({"tensor": name, "max_abs_diff": diff})
    identical = not differing and not shape_mismatch and not only_a and not only_b and bool(shared)
    return {
        "status": "identical" if identical else "different",
        "tensors_compared": len(shared),
        "tensors_identical": len(shared) - len(differing) - len(shape_mismatch),
        "tensors_differing": len(differing),
        "max_abs_diff": max_abs,
        "differing": differing[:25],
        "shape_mismatch": shape_mismatch[:25],
        "only_in_a": only_a[:25],
        "only_in_b": only_b[:25],
    }


def _embed(embedder: Embedder, fixture: Fixture) -> tuple[Array, Array]:
    """The fixture's audio embeddings (its 48 kHz clips resampled by the kit to the
    encoder's rate) and, with a text tower, its captions' (else an empty ``[0, 0]``)."""
    audio = embedder.embed_audio(list(fixture.waveforms), rate=SAMPLE_RATE)
    if not embedder.has_text:
        return audio, np.zeros((0, 0), np.float32)
    return audio, embedder.embed_text(list(fixture.captions))


def _clap_pair(a: Embedder, b: Embedder) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Two CLAP models' tensors under one naming, without the documented one-sided
    constants (two laion-clap checkpoints under their own names); None unless both are."""
    if not (isinstance(a.encoder, Pipeline) and isinstance(b.encoder, Pipeline)):
        return None
    if a.spec.format == b.spec.format == "laion":
        return a.encoder.raw_state(), b.encoder.raw_state()
    return tuple(  # type: ignore[return-value]
        {k: v for k, v in side.hf_state().items() if not is_hf_only(k)}
        for side in (a.encoder, b.encoder)
    )


def compare_hashes(a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    """Weights that are not tensor files, compared by the SHA-256 of each file (in name
    order: the same files under other names are the same weights)."""
    same = sorted(a.values()) == sorted(b.values()) and bool(a)
    return {
        "status": "identical" if same else "different",
        "compared_by": "sha256",
        "tensors_compared": 0,
        "tensors_identical": 0,
        "tensors_differing": 0,
        "max_abs_diff": 0.0,
        "files_a": dict(sorted(a.items())),
        "files_b": dict(sorted(b.items())),
        "differing": [],
        "shape_mismatch": [],
        "only_in_a": [],
        "only_in_b": [],
    }


def weights_report(a: Embedder, b: Embedder) -> dict[str, Any]:
    """Tensor by tensor where both sides' weights are tensors (CLAP under one naming; a
    user's torch, safetensors or npz files), else by the files' SHA-256."""
    pair = _clap_pair(a, b)
    if pair is None:
        sa, sb = a.state(), b.state()
        pair = None if sa is None or sb is None else (sa, sb)
    if pair is None:
        return compare_hashes(a.weight_hashes, b.weight_hashes)
    return {"compared_by": "tensors", **compare_weights(*pair)}


def _diagnose(
    a_spec: ModelSpec,
    b_spec: ModelSpec,
    a_overrides: dict[str, Any],
    b_overrides: dict[str, Any],
    a: Embedder,
    b: Embedder,
    b_emb: tuple[Array, Array],
    fixture: Fixture,
    device: str,
) -> dict[str, Any]:
    """Align each differing setting in turn; name the one that brings every cosine to 1."""
    names = differing(a.settings, b.settings)
    tried: list[dict[str, Any]] = []

    def attempt(label: str, changes: dict[str, Any]) -> dict[str, Any] | None:
        # Change side a to b's values; where a's library fixes a setting, change b instead.
        for side, spec, base, other in (
            ("a", a_spec, a_overrides, b.settings),
            ("b", b_spec, b_overrides, a.settings),
        ):
            values = {k: getattr(other, k) for k in changes}
            try:
                pipeline = load_embedder(spec, {**base, **values}, device)
            except UserError:
                continue
            emb = _embed(pipeline, fixture)
            pair = (emb, b_emb) if side == "a" else (_embed(a, fixture), emb)
            result = compare_embeddings(pair[0][0], pair[0][1], pair[1][0], pair[1][1])
            row = {
                "setting": label,
                "changed_side": side,
                "set": {k: v for k, v in values.items()},
                "min_cosine": result.get("min_cosine"),
                "closes_gap": result["matched"],
            }
            tried.append(row)
            return row
        tried.append(
            {
                "setting": label,
                "changed_side": None,
                "closes_gap": False,
                "note": "neither side accepts the other's value",
            }
        )
        return None

    closing = [n for n in names if (row := attempt(n, {n: None})) is not None and row["closes_gap"]]
    if not closing and len(names) > 1:
        row = attempt("+".join(names), {n: None for n in names})
        if row is not None and row["closes_gap"]:
            closing = ["+".join(names)]
    return {
        "differing_settings": {n: [getattr(a.settings, n), getattr(b.settings, n)] for n in names},
        "tried": tried,
        "closing_setting": closing[0] if closing else None,
    }


def compare(
    a_spec: ModelSpec,
    b_spec: ModelSpec,
    fixture: Fixture,
    *,
    a_overrides: dict[str, Any] | None = None,
    b_overrides: dict[str, Any] | None = None,
    device: str = "cpu",
) -> IdentityReport:
    """The full identity report (module docstring); ``report["passed"]`` gives the exit code."""
    a_overrides, b_overrides = dict(a_overrides or {}), dict(b_overrides or {})
    determinism = configure_determinism(device)
    a = load_embedder(a_spec, a_overrides, device)
    b = load_embedder(b_spec, b_overrides, device)
    weights = weights_report(a, b)
    a_emb, b_emb = _embed(a, fixture), _embed(b, fixture)
    emb = compare_embeddings(a_emb[0], a_emb[1], b_emb[0], b_emb[1])
    diagnosis: dict[str, Any] | None = None
    if weights["status"] != "identical":
        verdict = DIFFERENT
    elif emb["matched"]:
        verdict = IDENTICAL
    else:
        verdict = PREPROCESSING
        diagnosis = _diagnose(
            a_spec, b_spec, a_overrides, b_overrides, a, b, b_emb, fixture, device
        )
    block: IdentityBlock = {
        "fixture": fixture.name,
        "n": len(fixture.clip_ids),
        "hf_checkpoint": a_spec.name,
        "control": b_spec.name,
        "audio_embedding_cosine_per_clip": emb.get("audio_embedding_cosine_per_clip", []),
        "text_embedding_cosine_per_clip": emb.get("text_embedding_cosine_per_clip", []),
        "similarity_matrix_correlation": emb.get("similarity_matrix_correlation"),
        "similarity_matrix_max_abs_diff": emb.get("similarity_matrix_max_abs_diff"),
        "verdict": verdict,
        "weights": weights,
        "embeddings": {k: v for k, v in emb.items() if not k.endswith("_per_clip")}
        | {"match_cosine": MATCH_COSINE},
        "diagnosis": diagnosis,
        "a": a.meta(),
        "b": b.meta(),
        "n_captions": len(fixture.captions),
        "clip_ids": list(fixture.clip_ids),
        "determinism": determinism,
    }
    return {"checkpoint_identity": block, "passed": verdict == IDENTICAL}


class IdentityReport(TypedDict):
    """:func:`compare`'s report: the check, and whether it passed (exit code)."""

    checkpoint_identity: IdentityBlock
    passed: bool


def golden_dump(
    spec: ModelSpec,
    fixture: Fixture,
    overrides: dict[str, Any],
    device: str,
    min_cosine: float,
    max_abs_diff: float,
) -> Dump:
    """A golden reference-embedding file (the dump format) for ``spec`` on ``fixture``."""
    configure_determinism(device)
    pipeline = load_embedder(spec, overrides, device)
    require_text(pipeline, needed_by="a golden embeddings file")
    audio, text = _embed(pipeline, fixture)
    meta = {
        "kind": "audiorepro.golden-embeddings/1",
        "fixture": fixture.name,
        "model": pipeline.meta(),
        "thresholds": {"min_cosine": min_cosine, "max_abs_diff": max_abs_diff},
    }
    return make_dump(
        audio,
        text,
        fixture.caption_clip,
        audio_ids=fixture.clip_ids,
        captions=fixture.captions,
        meta=meta,
    )


def compare_golden(
    spec: ModelSpec, golden: Path, *, fixture: Fixture, overrides: dict[str, Any], device: str
) -> dict[str, Any]:
    """Compare a loaded checkpoint's fixture embeddings with stored reference embeddings."""
    ref = load_dump(golden)
    thresholds = ref.meta.get("thresholds")
    if ref.meta.get("kind") != "audiorepro.golden-embeddings/1" or not isinstance(thresholds, dict):
        raise UserError(
            "is not a golden embeddings file (meta_json kind/thresholds)",
            source=golden,
            key="meta_json",
        )
    try:
        min_cos, max_abs = float(thresholds["min_cosine"]), float(thresholds["max_abs_diff"])
    except (KeyError, TypeError, ValueError):
        raise UserError(
            "thresholds need min_cosine and max_abs_diff numbers", source=golden, key="meta_json"
        ) from None
    if ref.audio_ids != fixture.clip_ids or ref.captions != fixture.captions:
        raise UserError(
            f"was made on fixture {ref.meta.get('fixture')!r}, whose clips or captions differ from "
            f"{fixture.name!r} (pass the same --audio/--captions)",
            source=golden,
            key="audio_ids",
        )
    configure_determinism(device)
    pipeline = load_embedder(spec, overrides, device)
    require_text(pipeline, needed_by="a golden embeddings file")
    audio, text = _embed(pipeline, fixture)
    emb = compare_embeddings(audio, text, np.asarray(ref.audio_embeds), np.asarray(ref.text_embeds))
    worst_abs = max(emb["audio_max_abs_diff"], emb["text_max_abs_diff"])
    passed = bool(
        emb["min_cosine"] >= min_cos and worst_abs <= max_abs and not math.isnan(worst_abs)
    )
    return {
        "golden_identity": {
            "golden": golden.name,
            "golden_sha256": ref.sha256,
            "fixture": fixture.name,
            "model": pipeline.meta(),
            "golden_model": ref.meta.get("model"),
            "thresholds": {"min_cosine": min_cos, "max_abs_diff": max_abs},
            "audio_embedding_cosine_per_clip": emb["audio_embedding_cosine_per_clip"],
            "text_embedding_cosine_per_clip": emb["text_embedding_cosine_per_clip"],
            "min_cosine": emb["min_cosine"],
            "max_abs_diff": worst_abs,
            "verdict": "matches golden" if passed else "differs from golden",
        },
        "passed": passed,
    }
