"""The synthetic probe data as a tree in the published probe module's own layout and key names.

:mod:`audiorepro.synthetic.probe` writes one flat folder in audiorepro's names; a real probe
study keeps its files as its pipeline wrote them. This writes the same synthetic numbers as
such a tree, extra keys included (the module's ``protocol``, ``parameters``, ``folds`` with
``trials``, ``per_class``, ``confusion``, ``per_family``, ``rho``, receipts), so that
``studies/probe_published_layout.toml`` is shown to read it without any conversion::

    study.json                              backbones: models[].id, repo, revision, native_dim
    workflow.json, consolidated_benchmark/job_audit.json     workflow state, Slurm attempts
        (a failed attempt repaired by a later one), consolidated_benchmark/validation_job.json
    release/training_normalization.json, release/classes.json
    probes/{phase}/{model}/{variant}/       test_metrics.json, public_metrics.json,
        validation_metrics.json (gemini only), crema_matched_adapter.json,
        ravdess_matched_adapter.json, config.json, COMPLETE.json, metrics.jsonl
    whisper/{phase}/{size}/                 test_metrics.json, public_metrics.json, the two
        adapters, COMPLETE.json
    whisper/gemini/{size}/                  also {phase}_p3_{validation,test}_metrics.json: both
        phases' encoders on the identical P3 selections (the module's retention audit)

``variant`` > 0 writes another tree of the same layout: other numbers (every measured float
scaled), more extra keys; :func:`write_published_layout` returns every file's path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audiorepro.core.io import atomic_write_bytes, json_dumps
from audiorepro.synthetic.probe import EVENT_CLASSES, saved_fixtures

#: backbone id -> the scale of its numbers (both backbones use the fixtures of the clap heads)
BACKBONES = {"clap": 1.0, "clap-l": 0.93}
PHASES = ("legacy", "gemini")
VARIANTS = ("linear", "mlp")
CLASSES = ("angry", "happy", "sad")


def _scale(doc: Any, factor: float) -> Any:
    """Every float of a document times ``factor`` (rounded to 6 places); counts stay."""
    if isinstance(doc, dict):
        return {k: _scale(v, factor) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_scale(v, factor) for v in doc]
    if isinstance(doc, float):
        return round(doc * factor, 6)
    return doc


def _mapping(accuracy: float, n: int) -> dict[str, Any]:
    """A classifier's result in the module's keys: per_class, confusion, actor-bootstrap CI."""
    per = n // len(CLASSES)
    right = round(per * accuracy)
    return {
        "n": n,
        "accuracy": accuracy,
        "balanced_accuracy": accuracy,
        "macro_f1": round(accuracy * 0.98, 6),
        "accuracy_actor_bootstrap_95ci": [round(accuracy * 0.9, 6), round(accuracy * 1.05, 6)],
        "per_class": [
            {"class": c, "support": per, "recall": round(right / per, 6), "precision": accuracy}
            for c in CLASSES
        ],
        "confusion": {
            c: {o: right if o == c else (per - right) // 2 for o in CLASSES} for c in CLASSES
        },
    }


def _adapter(accuracy: float, n: int) -> dict[str, Any]:
    return {
        "metrics": _mapping(accuracy, n),
        "classes": list(CLASSES),
        "protocol": "Nested actor-disjoint matched MLP",
        "parameters": 12742,
        "folds": [
            {"fold": f, "train_clips": 80, "held_clips": 20, "train_actors": ["a1", "a2"],
             "held_actors": ["a3"], "outer_accuracy": accuracy,
             "selected": {"lr": 0.001, "epochs": 20, "inner_accuracy": accuracy},
             "trials": [{"lr": lr, "epochs": e, "inner_accuracy": accuracy}
                        for lr in (0.001, 0.003) for e in (20, 50)]}
            for f in range(2)
        ],
    }  # fmt: skip


def _public(fixture: dict[str, Any], accuracy: float) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(fixture))
    for cuts in out.values():
        for cut in cuts.values():
            if isinstance(cut, dict):  # the module's names beside audiorepro's
                cut["per_family"] = [{"family": "joy", "n": cut.get("n"), "mean_prompt_rho": 0.1}]
                for p in cut.get("per_prompt", []):
                    p["rho"] = p.get("spearman")
    out["crema"] = _mapping(round(accuracy * 0.8, 6), 120)
    out["ravdess"] = _mapping(round(accuracy * 0.7, 6), 96)
    return out


def _history(loss: float) -> bytes:
    lines = [
        {"stage": "S1", "epoch": e, "update": 457 * e,
         "validation": {"clips": 40, "loss": round(loss / e, 6)}}
        for e in (1, 2, 3)
    ]  # fmt: skip
    return "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()


def _run_files(head: str, phase: str, factor: float, variant: int) -> dict[str, Any]:
    """A probe run's files (name -> document; ``metrics.jsonl`` as bytes)."""
    fx = saved_fixtures()
    test = fx[f"{head}__{'legacy' if phase == 'legacy' else 'crema-like'}__test.json"]
    if test.get("cps_raw_mae") is None:  # predictions carry no speaking rate: a saved one
        test = {**test, "cps_raw_mae": round(2.0 - test["frame_f1"], 6)}
    accuracy = fx[f"{head}__ravdess-like__adapter.json"]["metrics"]["accuracy"]
    extra = {"checkpoint": "best.pt", "split": "test", "runtime_s": 12.5 + variant}
    if variant:
        extra["pipeline_note"] = f"tree variant {variant}"
    files: dict[str, Any] = {
        "test_metrics.json": {**_scale(test, factor), **extra},
        "public_metrics.json": _scale(_public(fx[f"{head}__human__public.json"], accuracy), factor),
        "crema_matched_adapter.json": _adapter(round(accuracy * factor, 6), 120),
        "ravdess_matched_adapter.json": _adapter(round(accuracy * factor * 0.9, 6), 96),
        "COMPLETE.json": {"updates": 914, "best_validation_loss": round(1.25 * factor, 6),
                          "finished_utc": "2026-10-07T00:00:00Z"},
    }  # fmt: skip
    if phase == "gemini":
        files["validation_metrics.json"] = {**_scale(test, factor * 1.02), "split": "validation"}
    return files


def _tree(variant: int) -> dict[str, Any]:
    """Every file of the tree, by its path."""
    factor = 1.0 - 0.05 * variant
    fx = saved_fixtures()
    tree: dict[str, Any] = {
        "study.json": {
            "models": [{"id": b, "repo": f"synthetic/{b}", "revision": "synthetic-r1",
                        "native_dim": 512 if b == "clap" else 1024} for b in BACKBONES],
            "targets": 24, "created_utc": "2026-10-06T00:00:00Z",
        },
        "workflow.json": {"state": "COMPLETE", "errors": [], "updated_utc": "2026-10-07T00:00:00Z",
                          "pilot_job": 100, "tasks": {"train": [{"id": 101}]}},
        "consolidated_benchmark/job_audit.json": {"jobs": [
            {"JobIDRaw": str(j), "JobName": n, "State": state, "ExitCode": code,
             "ElapsedRaw": 3600 + j + 120 * variant, "AllocTRES": f"cpu=72,gres/gpu={gpus}"}
            for j, n, state, code, gpus in (
                (99, "train", "FAILED", "1:0", 4), (100, "pilot", "COMPLETED", "0:0", 1),
                (101, "train", "COMPLETED", "0:0", 4))]},
        "consolidated_benchmark/validation_job.json": {"id": 102, "publication_recovery": True},
        "release/training_normalization.json": {"cps_std": 2.5, "cps_mean": 14.0},
        "release/classes.json": {"names": list(EVENT_CLASSES)},
    }  # fmt: skip
    for phase in PHASES:
        for backbone, scale in BACKBONES.items():
            for head in VARIANTS:
                files = _run_files(f"clap-{head}", phase, scale * factor, variant)
                config = {**fx[f"clap-{head}__legacy__config.json"], "seed": 7 + variant}
                files["config.json"] = config
                files["metrics.jsonl"] = _history(1.5 * scale * factor)
                for name, doc in files.items():
                    tree[f"probes/{phase}/{backbone}/{head}/{name}"] = doc
        whisper = _run_files("whisper-ft", phase, factor, variant)
        for name in ("test_metrics.json", "public_metrics.json", "COMPLETE.json",
                     "crema_matched_adapter.json", "ravdess_matched_adapter.json"):  # fmt: skip
            tree[f"whisper/{phase}/base/{name}"] = whisper[name]
        # The retention audit: each phase's encoder on the same P3 clips, kept (as the module
        # keeps them) in the tuned model's folder; tuning loses a little on the old domain.
        test = whisper["test_metrics.json"]
        for domain, shift in (("p3_validation", 1.0), ("p3_test", 0.98)):
            after = 0.94 if phase == "gemini" else 1.0
            doc = {**_scale(test, shift * after), "split": domain}
            tree[f"whisper/gemini/base/{phase}_{domain}_metrics.json"] = doc
    return tree


def write_published_layout(root: Path, *, variant: int = 0) -> list[Path]:
    """Write the tree under ``root`` (canonical JSON, JSONL as written); every file's path."""
    paths = []
    for name, doc in sorted(_tree(variant).items()):
        data = doc if isinstance(doc, bytes) else json_dumps(doc).encode()
        atomic_write_bytes(Path(root) / name, data)
        paths.append(Path(root) / name)
    return paths
