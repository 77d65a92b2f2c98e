"""A synthetic probe study in the published probe module's real layout, paths and key names.

The module (``shared/reference/probe-report-module.txt``) reads a study folder and three
sibling folders as its pipeline wrote them. This writes such a tree from a seeded random
generator, every file in the module's own spelling and nothing else (no second spelling of a
key, no converted file), so that ``studies/probe_published_layout.toml`` is shown to read it
as it is::

    embedding_probe_study_20261006/           the study (the module's ROOT)
        study.json                            backbones: models[].id, repo|model_name,
                                              revision|checkpoint, native_dim
        workflow.json                         state, errors, updated_utc, pilot_job,
                                              cache_jobs / tasks: name -> [{id}, ...]
        consolidated_benchmark/job_audit.json jobs[]: sacct's fields as text ("1800")
        consolidated_benchmark/validation_job.json   the supplementary validation job: its id,
                                              publication_recovery (it failed; recovered)
        probes/{phase}/{model}/{variant}/     test_metrics.json, public_metrics.json,
            crema_matched_adapter.json, ravdess_matched_adapter.json, config.json,
            COMPLETE.json, metrics.jsonl; gemini only: validation_metrics.json,
            pre_finetune_test_metrics.json
        whisper/legacy/{size}/                the two adapters, validation_metrics.json
                                              (no public file, no COMPLETE.json)
        whisper/gemini/{size}/                gemini_test_metrics.json,
            legacy_on_flash_test_metrics.json (the original encoder's Flash test),
            public_metrics.json, COMPLETE.json, the adapters, validation_metrics.json,
            {legacy,gemini}_{p3_validation,p3_test}_metrics.json (the retention audit)
    bench_eval_20261004/public_scores.json    the original Whisper's public results:
                                              models.{size}, benchmarks spelled emolia_emo
    hf_layered_release/model/                 training_normalization.json, classes.json
    gemini_finetune_preparation_20261005/training/whisper_{size}/metrics.jsonl

Public files spell per-prompt results ``rho`` and ``balanced_accuracy`` and per-family results
``family``, ``mean_prompt_rho``, ``balanced_accuracy_oracle``, as the module reads them.
``variant`` > 0 writes another tree of the same layout with other numbers (another seed).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from audiorepro.core.io import atomic_write_bytes, json_dumps

STUDY = "embedding_probe_study_20261006"
BENCH = "bench_eval_20261004"
RELEASE = "hf_layered_release/model"
GEMINI = "gemini_finetune_preparation_20261005"
BACKBONES = ("clapv2_s", "voiceclap_large_v2")
PHASES = ("legacy", "gemini")
VARIANTS = ("linear", "mlp")
SIZES = ("base", "small")
#: the module's target families, by name prefix (24 targets)
SCORES = (
    "emo_anger", "emo_joy", "emo_sadness", "emo_fear",
    "vn_warmth", "vn_pitch", "vn_breathiness", "vn_tempo",
    "audiobox:CE", "audiobox:CU", "audiobox:PC", "audiobox:PQ",
    "dnsmos:SIG", "dnsmos:BAK", "dnsmos:OVRL",
    "eiv_extra:score_speech_quality", "eiv_extra:Background_Noise",
    "eiv_extra:score_content_enjoyment", "voiceclap_attribute:age",
    "voiceclap_attribute:gender_presentation",
    "R_quality", "genuineness_0_6", "blend_0_10", "burst_count_log1p",
)  # fmt: skip
EMOTIONS = ("anger", "joy", "sadness", "fear")
EMO_CUTS = ("all_mapped_40", "strict_unanimous", "untruncated_mapped_40")
EMOLIA_CUTS = ("all_repo_rows", "repo_min_2_raters", "unflagged_min_2_raters",
               "untruncated_min_2_raters")  # fmt: skip
FAMILIES = {"emolia-emo": ("anger", "joy"), "emolia-dim": ("warmth", "pitch")}
CLASSES = {"crema": ("angry", "happy", "sad"), "ravdess": ("calm", "happy", "sad", "fearful")}
EVENT_CLASSES = ("laughter", "crying", "sigh", "cough", "scream")


class _Gen:
    """Numbers from one seeded generator, rounded as a pipeline writes them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def u(self, low: float, high: float, digits: int = 6) -> float:
        return round(self.rng.uniform(low, high), digits)

    def n(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


def _held_out(g: _Gen, clips: int, quality: float) -> dict[str, Any]:
    """A held-out metrics file (test, validation, P3 audits), the module's keys."""
    per_score = []
    for name in SCORES:
        valid = clips if name != "blend_0_10" else clips // 3
        nmae = None if name == "blend_0_10" and quality < 0.5 else g.u(0.2, 0.9) / (0.5 + quality)
        per_score.append({"score": name, "n": valid, "raw_mae": g.u(0.1, 2.0),
                          "normalized_mae": None if nmae is None else round(nmae, 6),
                          "pearson": g.u(0.1, 0.9), "spearman": g.u(0.1, 0.9)})  # fmt: skip
    matched = g.n(40, 90)
    return {
        "clips": clips,
        "loss": g.u(0.8, 2.0),
        "cps_raw_mae": g.u(1.0, 3.0),
        "frame_f1": g.u(0.3, 0.8),
        "burst_class_oracle_span_accuracy": g.u(0.3, 0.7),
        "burst_class_events": g.n(100, 160),
        "burst_matched_event_class_accuracy": g.u(0.3, 0.7),
        "burst_matched_event_class_n": matched,
        "burst_start_mae_s": g.u(0.05, 0.3),
        "burst_end_mae_s": g.u(0.05, 0.3),
        "speaker_cosine": {
            "timbre": {"mean": g.u(0.5, 0.9), "n": clips // 2},
            "identity": {"mean": g.u(0.4, 0.8), "n": clips // 2},
        },
        "burst_localization": {
            level: {
                "precision": g.u(0.2, 0.8),
                "recall": g.u(0.2, 0.8),
                "f1": g.u(0.2, 0.8),
                "matched": matched - 10 * i,
            }
            for i, level in enumerate(("0.1", "0.3", "0.5"))
        },
        "per_score": per_score,
    }


def _mapping(g: _Gen, corpus: str, n: int) -> dict[str, Any]:
    """A classifier's result: per_class, confusion, actor-bootstrap CI (the module's keys)."""
    classes = CLASSES[corpus]
    per = n // len(classes)
    right = {c: g.n(per // 3, per) for c in classes}
    accuracy = round(sum(right.values()) / (per * len(classes)), 6)
    return {
        "n": per * len(classes),
        "accuracy": accuracy,
        "balanced_accuracy": accuracy,
        "macro_f1": round(accuracy * 0.97, 6),
        "accuracy_actor_bootstrap_95ci": [
            round(accuracy * 0.9, 6),
            round(min(1.0, accuracy * 1.08), 6),
        ],
        "per_class": [
            {
                "class": c,
                "support": per,
                "recall": round(right[c] / per, 6),
                "precision": g.u(0.2, 0.9),
            }
            for c in classes
        ],
        "confusion": {
            c: {
                o: right[c] if o == c else (per - right[c]) * (j == (i + 1) % len(classes))
                for j, o in enumerate(classes)
            }
            for i, c in enumerate(classes)
        },
    }


def _adapter(g: _Gen, corpus: str) -> dict[str, Any]:
    metrics = _mapping(g, corpus, 120 if corpus == "crema" else 96)
    return {
        "metrics": metrics,
        "protocol": "Nested actor-disjoint matched MLP (5 outer, 3 inner actor folds)",
        "parameters": 12742 if corpus == "crema" else 12872,
        "folds": [
            {"fold": f, "train_clips": 96, "held_clips": 24, "train_actors": ["a1", "a2", "a3"],
             "held_actors": ["a4"], "outer_accuracy": g.u(0.3, 0.8),
             "selected": {"lr": 0.001, "epochs": 20, "inner_accuracy": g.u(0.3, 0.8)},
             "trials": [{"lr": lr, "epochs": e, "inner_accuracy": g.u(0.3, 0.8)}
                        for lr in (0.001, 0.003) for e in (20, 50)]}
            for f in range(2)
        ],
    }  # fmt: skip


def _emolia(g: _Gen, bench: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cut in EMOLIA_CUTS:
        n = g.n(300, 900)
        out[cut] = {
            "n": n, "prompts": 6, "positive_rate": g.u(0.2, 0.5),
            "mean_prompt_spearman": g.u(0.0, 0.5),
            "balanced_accuracy_oracle_per_prompt": g.u(0.5, 0.8),
            "balanced_accuracy_5fold_clip_grouped": g.u(0.5, 0.7),
            "per_family": [{"family": f, "n": n // 2, "mean_prompt_rho": g.u(0.0, 0.5),
                            "balanced_accuracy_oracle": g.u(0.5, 0.8)}
                           for f in FAMILIES[bench]],
            "per_prompt": [{"prompt": f"{f} | level {lvl}", "n": n // 6,
                            "rho": g.u(-0.1, 0.6), "balanced_accuracy": g.u(0.5, 0.8)}
                           for f in FAMILIES[bench] for lvl in (1, 2, 3)],
        }  # fmt: skip
    return out


def _public(g: _Gen, emolia: tuple[str, str] = ("emolia-emo", "emolia-dim")) -> dict[str, Any]:
    """A public_metrics.json (``emolia``: how its benchmarks are spelled)."""
    emonet: dict[str, Any] = {
        cut: {"n": g.n(800, 1200), "mae": g.u(0.5, 1.5), "rmse": g.u(1.0, 2.0),
              "pearson": g.u(0.2, 0.7), "spearman": g.u(0.2, 0.7)}
        for cut in EMO_CUTS
    }  # fmt: skip
    emonet["per_emotion"] = [
        {"category": e, "n": g.n(100, 300), "mae": g.u(0.5, 1.5), "rmse": g.u(1.0, 2.0),
         "pearson": g.u(0.1, 0.7), "spearman": g.u(0.1, 0.7)}
        for e in EMOTIONS
    ]  # fmt: skip
    return {
        "emonet": emonet,
        emolia[0]: _emolia(g, "emolia-emo"),
        emolia[1]: _emolia(g, "emolia-dim"),
        "crema": _mapping(g, "crema", 120),
        "ravdess": _mapping(g, "ravdess", 96),
    }


def _config(g: _Gen, variant: str) -> dict[str, Any]:
    return {
        "stages": ["S8", "S9", "S10"], "epochs_per_stage": 1, "train_clips": 4000,
        "validation_clips": 400, "test_clips": 400, "stage_training_clips": [1800, 1200, 1000],
        "parameters": 16513 * len(SCORES) if variant == "mlp" else 257 * len(SCORES),
        "scalar_parameters_each": 16513 if variant == "mlp" else 257,
        "normalization": {"cps_mean": 14.0, "cps_std": 2.5}, "seed": g.n(1, 99),
    }  # fmt: skip


def _history(g: _Gen) -> bytes:
    lines = [{"stage": s, "epoch": i + 1, "update": 120 * (i + 1),
              "validation": {"clips": 400, "loss": g.u(0.8, 1.6)}}
             for i, s in enumerate(("S8", "S9", "S10"))]  # fmt: skip
    return "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()


def _whisper_history(g: _Gen) -> bytes:
    lines = [{"epoch": e, "update": 457 * e, "validation_loss": g.u(0.7, 1.2)} for e in (1, 2)]
    return "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()


def _records(g: _Gen) -> dict[str, Any]:
    """The workflow record, the Slurm attempts (sacct's text) and the validation receipt: a
    cache job and a Whisper task each repaired by a later attempt, and a supplementary
    validation job that failed after evaluating (its upload) and was recovered."""
    jobs = [  # id, name, state, exit, GPUs
        (5000, "pilot", "COMPLETED", "0:0", 1), (5001, "cache_clapv2_s", "COMPLETED", "0:0", 4),
        (5002, "cache_voiceclap_large_v2", "FAILED", "1:0", 4),
        (5003, "cache_voiceclap_large_v2", "COMPLETED", "0:0", 4),
        (5004, "probes_legacy", "COMPLETED", "0:0", 4),
        (5005, "probes_gemini", "COMPLETED", "0:0", 4),
        (5006, "whisper_base", "NODE_FAIL", "0:0", 4),
        (5007, "whisper_base", "COMPLETED", "0:0", 4),
        (5008, "whisper_small", "COMPLETED", "0:0", 4),
        (5009, "full_validation", "FAILED", "1:0", 4),
    ]  # fmt: skip
    workflow = {
        "state": "COMPLETE", "errors": [], "updated_utc": "2026-10-07T04:12:09Z",
        "pilot_job": 5000,
        "cache_jobs": {"clapv2_s": [{"id": 5001}],
                       "voiceclap_large_v2": [{"id": 5002}, {"id": 5003}]},
        "tasks": {"probes_legacy": [{"id": 5004}], "probes_gemini": [{"id": 5005}],
                  "whisper_base": [{"id": 5006}, {"id": 5007}], "whisper_small": [{"id": 5008}]},
    }  # fmt: skip
    audit = {"jobs": [
        {"JobIDRaw": str(j), "JobName": name, "State": state, "ExitCode": code,
         "ElapsedRaw": str(g.n(600, 7200)),
         "AllocTRES": f"billing=72,cpu=72,gres/gpu={gpus},node=1"}
        for j, name, state, code, gpus in jobs]}  # fmt: skip
    return {
        f"{STUDY}/workflow.json": workflow,
        f"{STUDY}/consolidated_benchmark/job_audit.json": audit,
        f"{STUDY}/consolidated_benchmark/validation_job.json": {
            "id": 5009, "publication_recovery": True, "evaluated": 8},
    }  # fmt: skip


def _tree(variant: int) -> dict[str, Any]:
    """Every file of the tree, by its path."""
    g = _Gen(20261007 + variant)
    tree: dict[str, Any] = {
        f"{STUDY}/study.json": {
            "models": [
                {"id": "clapv2_s", "repo": "synthetic/clapv2-s", "revision": "r1",
                 "native_dim": 512},
                {"id": "voiceclap_large_v2", "model_name": "synthetic/voiceclap-large-v2",
                 "checkpoint": "voiceclap_l_v2.pt", "native_dim": 1024},
            ],
            "targets": len(SCORES),
        },
        f"{RELEASE}/training_normalization.json": {"cps_std": 2.5, "cps_mean": 14.0},
        f"{RELEASE}/classes.json": {"names": list(EVENT_CLASSES)},
        **_records(g),
    }  # fmt: skip
    for phase in PHASES:
        for model in BACKBONES:
            for head in VARIANTS:
                out = f"{STUDY}/probes/{phase}/{model}/{head}"
                quality = g.u(0.3, 0.9)
                # A key the module never shows (its pipeline's receipt): kept, listed unused.
                extra = {"checkpoint": "best.pt"} | ({"pipeline_note": f"tree variant {variant}"}
                                                    if variant else {})  # fmt: skip
                tree[f"{out}/test_metrics.json"] = _held_out(g, 400, quality) | extra
                tree[f"{out}/public_metrics.json"] = _public(g)
                for corpus in CLASSES:
                    tree[f"{out}/{corpus}_matched_adapter.json"] = _adapter(g, corpus)
                tree[f"{out}/config.json"] = _config(g, head)
                tree[f"{out}/COMPLETE.json"] = {
                    "updates": 360,
                    "best_validation_loss": g.u(0.8, 1.3),
                }
                tree[f"{out}/metrics.jsonl"] = _history(g)
                if phase == "gemini":
                    tree[f"{out}/validation_metrics.json"] = _held_out(g, 320, quality)
                    tree[f"{out}/pre_finetune_test_metrics.json"] = _held_out(g, 400, quality)
    bench: dict[str, Any] = {"models": {}}
    for size in SIZES:
        legacy, tuned = f"{STUDY}/whisper/legacy/{size}", f"{STUDY}/whisper/gemini/{size}"
        bench["models"][size] = _public(g, ("emolia_emo", "emolia_dim"))
        tree[f"{tuned}/legacy_on_flash_test_metrics.json"] = _held_out(g, 400, 0.4)
        tree[f"{tuned}/gemini_test_metrics.json"] = _held_out(g, 400, 0.9)
        tree[f"{tuned}/public_metrics.json"] = _public(g)
        tree[f"{tuned}/COMPLETE.json"] = {"updates": 914, "best_validation_loss": g.u(0.7, 1.0)}
        for out in (legacy, tuned):
            for corpus in CLASSES:
                tree[f"{out}/{corpus}_matched_adapter.json"] = _adapter(g, corpus)
            tree[f"{out}/validation_metrics.json"] = _held_out(g, 320, 0.6)
        for phase in PHASES:
            for domain in ("p3_validation", "p3_test"):
                tree[f"{tuned}/{phase}_{domain}_metrics.json"] = _held_out(g, 200, 0.5)
        tree[f"{GEMINI}/training/whisper_{size}/metrics.jsonl"] = _whisper_history(g)
    tree[f"{BENCH}/public_scores.json"] = bench
    return tree


def write_published_layout(root: Path, *, variant: int = 0) -> list[Path]:
    """Write the tree under ``root`` (canonical JSON, JSONL as written); every file's path."""
    paths = []
    for name, doc in sorted(_tree(variant).items()):
        data = doc if isinstance(doc, bytes) else json_dumps(doc).encode()
        atomic_write_bytes(Path(root) / name, data)
        paths.append(Path(root) / name)
    return paths
