"""A synthetic probe study: prediction files of a few runs, made reproducibly from seeds.

Three models in three families (a frozen CLAP with a linear head, the same with an MLP head, a
fine-tuned Whisper encoder), each with two prediction files: one for the "crema-like" corpus
(24 regression targets with some items not annotated, 6-class acted-emotion classification
with actors as groups, vocal-burst events on a 20 ms grid, speaker vectors) and one for the
"ravdess-like" corpus (8-class classification only). Better models get less noise, so the
tables have a story, but every number comes from the metric code. Only PCG64 draws and
arithmetic (no SIMD transcendental kernels) go into the values, so the bytes are the same on
every machine. ``tools/make_fixtures.py probe`` writes them; the demo study builds them too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.io import atomic_write_bytes, json_dumps, npz_bytes
from audiorepro.metrics.probe import probe_report
from audiorepro.metrics.probe_records import ProbeReport

#: (run id prefix, model label, family, noise level)
MODELS = (
    ("clap-linear", "CLAP (frozen) + linear", "frozen + linear", 0.9),
    ("clap-mlp", "CLAP (frozen) + MLP", "frozen + MLP", 0.7),
    ("whisper-ft", "Whisper-base (fine-tuned)", "fine-tuned", 0.45),
)
TARGETS = ("valence", "arousal", "dominance", *(f"emotion_{i:02d}" for i in range(1, 22)))
CORPORA = {"crema-like": 6, "ravdess-like": 8}
FRAME = 0.02  # seconds per frame


def _rng(*key: object) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(seed))


def _regression(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng = _rng("truth", "regression")
    n, k = 120, len(TARGETS)
    true = truth_rng.standard_normal((n, k)) * 1.5 + 3.0
    missing = truth_rng.random((n, k)) < 0.1
    true[missing] = np.nan
    true[:, len(TARGETS) - 1] = np.nan  # one target nobody annotated: every metric undefined
    pred = true + _rng(name, "regression").standard_normal((n, k)) * noise * 1.5
    pred[:, len(TARGETS) - 1] = 3.0
    return {
        "reg_names": np.asarray(TARGETS),
        "reg_true": true,
        "reg_pred": np.where(np.isnan(pred), 3.0, pred),
        "reg_train_sd": np.full(k, 1.5),
        "reg_train_mean": np.full(k, 3.0),
    }


def _classification(noise: float, name: str, corpus: str) -> dict[str, npt.NDArray[Any]]:
    classes = CORPORA[corpus]
    truth_rng = _rng("truth", corpus)
    m, actors = 12 * classes, 10
    true = np.arange(m) % classes
    group = np.asarray([f"actor_{i % actors:02d}" for i in truth_rng.permutation(m)])
    rng = _rng(name, corpus)
    wrong = rng.random(m) < noise * 0.6
    pred = np.where(wrong, rng.integers(0, classes, m), true)
    return {
        "cls_names": np.asarray([f"class_{c}" for c in range(classes)]),
        "cls_true": true.astype(np.int64),
        "cls_pred": pred.astype(np.int64),
        "cls_group": group,
    }


def _events(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng, rng = _rng("truth", "events"), _rng(name, "events")
    clips, frames_per_clip = 20, 250  # 5 s clips on the 20 ms grid
    ref, ref_clip, ref_cls, pred, pred_clip, pred_cls, oracle = [], [], [], [], [], [], []
    frame_true = np.zeros(clips * frames_per_clip, dtype=np.int64)
    frame_prob = np.zeros(clips * frames_per_clip)
    for clip in range(clips):
        for slot in range(int(truth_rng.integers(1, 4))):
            start = round(slot * 1.6 + float(truth_rng.random()) * 0.6, 2)
            end = round(start + 0.3 + float(truth_rng.random()) * 0.6, 2)
            cls = int(truth_rng.integers(0, 3))
            ref.append((start, end))
            ref_clip.append(clip)
            ref_cls.append(cls)
            oracle.append(cls if rng.random() > noise * 0.5 else int(rng.integers(0, 3)))
            first, last = round(start / FRAME), round(end / FRAME)
            frame_true[clip * frames_per_clip + first : clip * frames_per_clip + last] = 1
            if rng.random() < 1.0 - noise * 0.3:  # detected, with timing error
                shift = float(rng.standard_normal()) * noise * 0.15
                pred.append((round(start + shift, 2), round(end + shift * 0.5, 2)))
                pred_clip.append(clip)
                pred_cls.append(cls if rng.random() > noise * 0.4 else int(rng.integers(0, 3)))
        if rng.random() < noise * 0.3:  # a false alarm
            pred.append((4.5, 4.8))
            pred_clip.append(clip)
            pred_cls.append(0)
    jitter = rng.random(frame_prob.shape) * noise * 0.8
    frame_prob = np.clip(np.where(frame_true == 1, 0.9 - jitter, 0.05 + jitter * 0.6), 0.0, 1.0)
    return {
        "ev_ref": np.asarray(ref, dtype=np.float64),
        "ev_ref_clip": np.asarray(ref_clip, dtype=np.int64),
        "ev_ref_class": np.asarray(ref_cls, dtype=np.int64),
        "ev_oracle_class": np.asarray(oracle, dtype=np.int64),
        "ev_pred": np.asarray(pred, dtype=np.float64).reshape(-1, 2),
        "ev_pred_clip": np.asarray(pred_clip, dtype=np.int64),
        "ev_pred_class": np.asarray(pred_cls, dtype=np.int64),
        "frame_true": frame_true,
        "frame_prob": frame_prob,
    }


def _vectors(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng, rng = _rng("truth", "speaker"), _rng(name, "speaker")
    ref = truth_rng.standard_normal((30, 16))
    pred = ref + rng.standard_normal((30, 16)) * noise
    valid = np.ones(30, dtype=bool)
    valid[[3, 17]] = False
    # A second, named set (identity vectors of another width, fewer valid clips): drawn after
    # the first so that the unnamed set's values are those of the files before it existed.
    ident_ref = truth_rng.standard_normal((30, 24))
    ident_pred = ident_ref + rng.standard_normal((30, 24)) * noise * 1.3
    ident_valid = np.ones(30, dtype=bool)
    ident_valid[[0, 3, 11, 17, 29]] = False
    return {
        "spk_ref": ref,
        "spk_pred": pred,
        "spk_valid": valid,
        "spk_ref__identity": ident_ref,
        "spk_pred__identity": ident_pred,
        "spk_valid__identity": ident_valid,
    }


def probe_fixtures() -> dict[str, dict[str, npt.NDArray[Any]]]:
    """Every prediction file, by file name."""
    files: dict[str, dict[str, npt.NDArray[Any]]] = {}
    for run, _, _, noise in MODELS:
        files[f"{run}__crema-like.npz"] = {
            **_regression(noise, run),
            **_classification(noise, run, "crema-like"),
            **_events(noise, run),
            **_vectors(noise, run),
        }
        files[f"{run}__ravdess-like.npz"] = _classification(noise, run, "ravdess-like")
    return files


def write_probe_fixtures(out: Path) -> dict[str, str]:
    """Write every prediction file and saved-measurement file into ``out``; returns name ->
    SHA-256."""
    hashes = {}
    for name, arrays in {**probe_fixtures(), **human_fixtures()}.items():
        data = npz_bytes(arrays)
        atomic_write_bytes(Path(out) / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    for name, doc in saved_fixtures().items():
        text = json_dumps(doc).encode()
        atomic_write_bytes(Path(out) / name, text)
        hashes[name] = hashlib.sha256(text).hexdigest()
    atomic_write_bytes(Path(out) / "notes.md", NOTES.encode())
    hashes["notes.md"] = hashlib.sha256(NOTES.encode()).hexdigest()
    return hashes


# --- human benchmark and saved measurements (issue 16) -------------------------------------

HUMAN_CUT = "min_2_raters"
#: The human benchmark's dimensions: prompts 0 and 1 ask about the first, 2 and 3 the second.
DIMENSIONS = ("joy", "calm")
#: Event class names by class index (the study's ``event_classes``).
EVENT_CLASSES = ("laugh", "cry", "sigh")
#: The demo's narrative section (``[[section]]``): what a study writes beside its tables.
NOTES = """\
Legacy rows were measured on *held-out A*, tuned rows on *held-out B*: compare within a
domain. The `p3` selection is identical before and after tuning, so the retention table is the
one place where one model's phases meet on the same clips.

- Human-benchmark cuts (`all`, `min_2_raters`) are separate rows of every human table.
- Event classes are named by the study (`event_classes`); support counts reference events.

Every number is synthetic.
"""
#: The saved value the failing fixture changes: (run, split file, target, field, offset).
TAMPERED = ("clap-mlp/crema-like", "test", "valence", "raw_mae", 0.001)


def _human(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    """A human benchmark: 4 prompts x 30 clips, a binary human label per item, a model score
    that separates the labels less well with more noise; a label cut keeps items with at
    least two raters."""
    truth_rng, rng = _rng("truth", "human"), _rng(name, "human")
    prompts, clips = 4, 30
    n = prompts * clips
    label = (truth_rng.random(n) < 0.4).astype(np.int64)
    raters = truth_rng.integers(1, 4, n)
    # Scores on a 0.05 grid: ties happen, as with real rating-like model outputs.
    score = np.round((label * 1.0 + rng.standard_normal(n) * noise * 1.2) * 20) / 20
    return {
        "hb_bench": np.asarray(["emo-like"] * n),
        "hb_prompt": np.asarray([f"prompt_{i // clips}" for i in range(n)]),
        "hb_clip": np.asarray([f"clip_{i % clips:02d}" for i in range(n)]),
        "hb_score": score,
        "hb_label": label,
        "hb_cut_names": np.asarray([HUMAN_CUT]),
        "hb_cut": (raters >= 2).reshape(n, 1),
        "hb_dimension": np.asarray([DIMENSIONS[(i // clips) // 2] for i in range(n)]),
    }


def human_fixtures() -> dict[str, dict[str, npt.NDArray[Any]]]:
    """The human-benchmark prediction file of each model."""
    return {f"{run}__human.npz": _human(noise, run) for run, _, _, noise in MODELS}


def _saved_from_report(report: ProbeReport) -> dict[str, Any]:
    """What a study's own scoring code would have saved: the held-out file of a run whose
    predictions give these numbers (one speaker-vector set, ``timbre``)."""
    ev = report["events"]
    return {
        "clips": 120,
        "loss": None,
        "per_score": [
            {
                "score": name,
                "n": v["n"],
                "raw_mae": v["mae"],
                "normalized_mae": v["normalized_mae"],
                "pearson": v["pearson"],
                "spearman": v["spearman"],
            }
            for name, v in report["regression"].items()
        ],
        "speaker_cosine": {
            "timbre": {"mean": report["vectors"]["mean_cosine"], "n": report["vectors"]["n"]},
            **{
                name: {"mean": v["mean_cosine"], "n": v["n"]}
                for name, v in report["speaker_sets"].items()
            },
        },
        "burst_localization": {
            t: {k: ev["iou"][t][k] for k in ("precision", "recall", "f1", "matched")}
            for t in ("0.1", "0.3", "0.5")
        },
        "frame_f1": ev["frame_f1"],
        "cps_raw_mae": None,
        "burst_class_oracle_span_accuracy": ev["oracle_span_class_accuracy"],
        "burst_matched_event_class_accuracy": ev["detected_span_class_accuracy"],
        "burst_start_mae_s": ev["start_mae_s"],
        "burst_end_mae_s": ev["end_mae_s"],
        "burst_per_class": [
            {
                "name": EVENT_CLASSES[int(c)],
                "support": v["support"],
                "oracle_span_accuracy": v["oracle_span_accuracy"],
            }
            for c, v in ev["classes"].items()
        ],
    }


def _saved_public(human: dict[str, Any], noise: float, name: str) -> dict[str, Any]:
    """The public-benchmark file a study's scoring code would have saved: each cut's numbers
    with its prompts and dimensions as lists, and a saved-only per-category list."""
    rng = _rng(name, "public")
    out: dict[str, Any] = {}
    for bench, cuts in human.items():
        out[bench] = {
            cut: {
                **{k: v for k, v in numbers.items() if k not in ("per_prompt", "per_dimension")},
                "per_prompt": [{"prompt": p, **v} for p, v in numbers["per_prompt"].items()],
                "per_dimension": [
                    {"dimension": d, **v} for d, v in numbers["per_dimension"].items()
                ],
            }
            for cut, numbers in cuts.items()
        }
        out[bench]["per_emotion"] = [
            {"category": c, "n": 60, "mae": round(0.5 + noise * 0.5 + float(rng.random()) * 0.1, 4),
             "rmse": round(0.7 + noise * 0.5 + float(rng.random()) * 0.1, 4),
             "pearson": round(0.9 - noise * 0.5, 4), "spearman": round(0.88 - noise * 0.5, 4)}
            for c in DIMENSIONS
        ]  # fmt: skip
    return out


def _saved_legacy(noise: float, name: str, split: str) -> dict[str, Any]:
    """A saved-only held-out file (no predictions behind it): numbers drawn from the seed,
    rounded to 4 decimals, worse with more noise; two named speaker-vector sets."""
    rng = _rng(name, "legacy", split)

    def r(x: float) -> float:
        return round(x, 4)

    per_score = []
    for i, target in enumerate(TARGETS):
        if i == len(TARGETS) - 1:  # the target nobody annotated
            per_score.append(
                {"score": target, "n": 0, "raw_mae": None, "normalized_mae": None,
                 "pearson": None, "spearman": None}
            )  # fmt: skip
            continue
        nmae = r(0.5 + noise * 0.6 + float(rng.random()) * 0.1)
        rho = r(0.95 - noise * 0.6 - float(rng.random()) * 0.1)
        per_score.append(
            {"score": target, "n": 108, "raw_mae": r(nmae * 1.5), "normalized_mae": nmae,
             "pearson": r(rho + 0.02), "spearman": rho}
        )  # fmt: skip
    f1 = [r(0.9 - noise * 0.3 - k * 0.1 - float(rng.random()) * 0.05) for k in range(3)]
    return {
        "clips": 120 if split == "test" else 80,
        "loss": r(1.0 + noise),
        "per_score": per_score,
        "speaker_cosine": {
            "timbre": {"mean": r(0.9 - noise * 0.4), "n": 28},
            "identity": {"mean": r(0.8 - noise * 0.5), "n": 25},
        },
        "burst_localization": {
            t: {"precision": r(f + 0.03), "recall": r(f - 0.03), "f1": f, "matched": 40 - 5 * k}
            for k, (t, f) in enumerate(zip(("0.1", "0.3", "0.5"), f1, strict=True))
        },
        "frame_f1": r(0.95 - noise * 0.3),
        "cps_raw_mae": r(1.0 + noise * 2),
        "burst_class_oracle_span_accuracy": r(0.9 - noise * 0.3),
        "burst_class_events": 48,
        "burst_matched_event_class_accuracy": r(0.85 - noise * 0.3),
        "burst_matched_event_class_n": 40,
        "burst_start_mae_s": r(0.02 + noise * 0.05),
        "burst_end_mae_s": r(0.03 + noise * 0.05),
        "burst_per_class": [
            {"name": c, "support": 16, "oracle_span_accuracy": r(0.9 - noise * 0.3 - k * 0.05)}
            for k, c in enumerate(EVENT_CLASSES)
        ],
    }


def saved_fixtures() -> dict[str, Any]:
    """Every saved-measurement JSON document, by file name: for each model a legacy run
    (saved only: test and an extra ``p3`` selection), for each tuned crema-like run its test
    file (from its predictions) and the same ``p3`` selection, for each human run its public
    scores, for each ravdess-like run its adapter result, and the tampered copy."""
    files: dict[str, Any] = {}
    preds = probe_fixtures()
    human = human_fixtures()
    for run, _, _, noise in MODELS:
        files[f"{run}__legacy__test.json"] = _saved_legacy(noise + 0.15, run, "test")
        files[f"{run}__legacy__p3.json"] = _saved_legacy(noise + 0.15, run, "p3")
        files[f"{run}__legacy__config.json"] = {
            "stages": ["S1", "S2", "S3"], "epochs_per_stage": 2, "train_clips": 960,
            "parameters": 257 if "linear" in run else 16513, "backbone_revision": "synthetic-r1",
        }  # fmt: skip
        report = probe_report(preds[f"{run}__crema-like.npz"], source="", sha256=None)
        files[f"{run}__crema-like__test.json"] = _saved_from_report(report)
        files[f"{run}__crema-like__p3.json"] = _saved_legacy(noise, run, "p3")
        files[f"{run}__crema-like__config.json"] = {
            "stages": ["S4"], "epochs_per_stage": 2, "train_clips": 960,
            "parameters": 257 if "linear" in run else 16513, "backbone_revision": "synthetic-r1",
        }  # fmt: skip
        rav = probe_report(preds[f"{run}__ravdess-like.npz"], source="", sha256=None)
        files[f"{run}__ravdess-like__adapter.json"] = {
            "metrics": {k: rav["classification"][k] for k in
                        ("n", "accuracy", "balanced_accuracy", "macro_f1")},
            "classes": [f"class_{c}" for c in range(CORPORA["ravdess-like"])],
        }  # fmt: skip
        hum = probe_report(human[f"{run}__human.npz"], source="", sha256=None)
        files[f"{run}__human__public.json"] = _saved_public(hum["human"], noise, run)
    run, split, target, field, offset = TAMPERED
    tampered = json.loads(json.dumps(files[f"{run.replace('/', '__')}__{split}.json"]))
    hit = next(s for s in tampered["per_score"] if s["score"] == target)
    hit[field] = hit[field] + offset
    files[f"tampered__{run.replace('/', '__')}__{split}.json"] = tampered
    return files
