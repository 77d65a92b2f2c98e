"""A study of any kind -> its output folder; and re-reading a study or an output folder.

This is the runner's entry: it looks the study's kind up in the registry of kinds
(:mod:`.kinds`: :mod:`.kinds.retrieval`, :mod:`.kinds.probe`, :mod:`.kinds.zeroshot`,
:mod:`.kinds.linear_probe`, :mod:`.kinds.speaker_verification`, :mod:`.kinds.hear`), runs the
executor that extracts what is missing (:mod:`.executors`) for a kind that extracts, runs the kind's
steps (:func:`.kinds.run_kind`) into staging and publishes the output folder whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from audiorepro.checks.verify import Summary, settle
from audiorepro.core.errors import write_error
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.executors.slurm import SlurmOptions, run_slurm

# The built-in kinds register themselves (:func:`.kinds.register_kind`) when imported.
from audiorepro.runner.kinds import (
    AnyKind,
    Context,
    hear,  # noqa: F401
    kind_named,
    kind_spec_modules,  # noqa: F401  (the frame's way to the kinds' spec modules)
    linear_probe,  # noqa: F401
    probe,  # noqa: F401
    retrieval,  # noqa: F401
    run_kind,
    speaker_verification,  # noqa: F401
    zeroshot,  # noqa: F401
)
from audiorepro.runner.output.attest import sign_folder
from audiorepro.runner.output.folder import OUT_TO_CHECK as OUT_TO_CHECK
from audiorepro.runner.output.folder import folder_problem as folder_problem
from audiorepro.runner.output.folder import recorded_nothing as recorded_nothing
from audiorepro.runner.output.folder import verify_output_dir as verify_output_dir
from audiorepro.runner.output.keys import SigningKey
from audiorepro.runner.output.outputs import Outcome
from audiorepro.runner.output.publish import (
    check_out,
    claim,
    discard,
    new_staging,
    publish,
)
from audiorepro.specs.study import Study


def study_kind(study: Study) -> AnyKind:
    """The registered kind (:mod:`.kinds`) that runs ``study``."""
    return kind_named(study.kind)


def study_extraction(study: Study) -> StudyExtraction | None:
    """The cells the study's kind extracts, as the executors see them (None: none)."""
    return study_kind(study).extraction(study)


def run_study(
    study: Study,
    out: Path,
    *,
    progress: bool = True,
    slurm: SlurmOptions | None = None,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Run a study of any registered kind; returns whether it passed, and why not (the full
    record is ``verification.json`` in ``out``).

    Extraction runs here (the local executor, cell by cell) unless ``slurm`` is given: then
    the missing extractions of a kind that extracts (retrieval, zero-shot) first run as Slurm
    job arrays. If any array task failed, nothing is computed: the result has
    ``executor_failed`` and names the tasks.
    """
    kind = study_kind(study)
    extraction = kind.extraction(study)
    if slurm is not None and extraction is not None:
        outcome = run_slurm(extraction, out, slurm, say=say)
        if outcome.failed:
            return {"passed": False, "failures": outcome.failed, "executor_failed": True}
    return run_kind(kind, study, Context(Path(out), Path(out) / "cache" / "dumps", progress))


#: What gives ``verify STUDY`` something to check, said when a study has none.
STUDY_TO_CHECK = (
    "the study has no published value to recompute: add a [[published]] table "
    "(docs/studies.md); reproduce runs its {more} and verify OUT re-reads them"
)


def verify_study(study: Study, cache: Path) -> Summary:
    """Recompute only what the study's published values need (``audiorepro verify STUDY``);
    a study with none has nothing to check (never a PASS: :func:`.checks.verify.settle`)."""
    kind = study_kind(study)
    extraction = kind.extraction(study)
    if extraction is not None:
        # The checkpoints of the cells it extracts: exit 2 before any model is built.
        extraction.preflight(only={p.cell for p in study.published})
    return settle(kind.verify(study, cache), 0, STUDY_TO_CHECK.format(more=kind.run_checks))


def run_studies(
    jobs: list[tuple[Study, str]],
    out: Path,
    *,
    progress: bool = True,
    slurm: SlurmOptions | None = None,
    say: Callable[[str], None] = print,
    sign_key: SigningKey | None = None,
) -> list[tuple[Study, Path, Outcome]]:
    """Run studies into one output folder (``"."`` for the top-level study, ``"probe"`` for a
    nested one) and publish it whole (:mod:`.output.publish`).

    Nested studies run first, so the top-level manifest, written last, covers their files.
    When a Slurm array task failed, nothing is published (the outcome has ``executor_failed``).
    With ``sign_key``, the attestation (:mod:`.output.attest`) is written in staging, last.
    Returns each study with its folder in OUT and its outcome, in the order given.
    """
    out = Path(out)
    with claim(out):
        return _run_claimed(jobs, out, progress=progress, slurm=slurm, say=say, sign_key=sign_key)


def _run_claimed(
    jobs: list[tuple[Study, str]],
    out: Path,
    *,
    progress: bool,
    slurm: SlurmOptions | None,
    say: Callable[[str], None],
    sign_key: SigningKey | None,
) -> list[tuple[Study, Path, Outcome]]:
    """:func:`run_studies` with OUT held (:func:`.output.publish.claim`)."""
    check_out(out)
    for study, _ in jobs:
        extraction = study_extraction(study)
        if extraction is not None:  # a corrupt checkpoint: exit 2 before OUT gets anything
            extraction.preflight()
    staging = new_staging(out)
    order = sorted(range(len(jobs)), key=lambda i: -len(Path(jobs[i][1]).parts))
    outcomes: dict[int, Outcome] = {}
    try:
        for i in order:
            study, rel = jobs[i]
            target = staging / rel
            try:
                target.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise write_error(exc, target) from None
            kind = study_kind(study)
            extraction = kind.extraction(study)
            if slurm is not None and extraction is not None:
                executed = run_slurm(extraction, out, slurm, say=say)
                if executed.failed:
                    discard(staging)
                    failed: Outcome = {
                        "passed": False,
                        "failures": executed.failed,
                        "executor_failed": True,
                    }
                    return [(study, out / rel, failed)]
            outcomes[i] = run_kind(kind, study, Context(target, out / "cache" / "dumps", progress))
        if sign_key is not None:
            sign_folder(staging, sign_key)
        publish(staging, out)
    finally:
        discard(staging)  # published: already gone; failed or killed: nothing left behind
    return [(study, out / rel, outcomes[i]) for i, (study, rel) in enumerate(jobs)]
