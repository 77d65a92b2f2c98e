"""The speaker-verification kind's spec: the ``kind = "speaker-verification"`` study file's
tables, their checks, and the study they load into (the frame it shares with every kind:
:mod:`audiorepro.specs.study`). Its extraction and published tables extend the linear-probe
kind's (the same "model over an audio folder" and "values of one cell" shapes).

A speaker-verification study has ``[[cell]]`` tables of clip embeddings (a dump, or every clip
of an audio folder extracted by any encoder) and a trial list
(:mod:`audiorepro.formats.trials`); its published value is the equal error rate ``eer`` (or any
verification definition)::

    kind = "speaker-verification"
    [[cell]]
    id = "resemblyzer/speech"
    model = "resemblyzer"               # the table row
    trials = "speech/trials.csv"        # enrollment,test,target
    trials_sha256 = "<64 hex>"
    extract = { model = "resemblyzer", audio = "speech" }   # or dump = "...", sha256 = "..."
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from audiorepro.core.errors import UserError
from audiorepro.formats.captions import list_audio
from audiorepro.formats.probe_inputs import read_clip_embeddings
from audiorepro.formats.speakers import read_speakers, trial_speakers
from audiorepro.formats.trials import Trials, check_clips, read_trials
from audiorepro.metrics.verification_toolkits import DEFINITIONS
from audiorepro.runner.kinds.linear_probe.spec import (
    LinearProbeExtractSpec,
    LinearProbePublishedSpec,
)
from audiorepro.specs.cells import cell_published, check_hashes, dump_or_extract, unique_cells
from audiorepro.specs.published import Number
from audiorepro.specs.schema import KeyProblem, Spec, validate
from audiorepro.specs.settings import check_settings
from audiorepro.specs.study import (
    FileSha256,
    Published,
    RelativePath,
    Selection,
    StudyFile,
    required_path,
    study_path,
)

#: The published names of a speaker-verification cell: its equal error rate.
#: What a speaker-verification cell's published values may name: every verification definition
#: (``eer``, ``eer_rocch``, ``eer_speechbrain``, ``min_dcf_p0.01``, ...; docs/metrics.md), so
#: that a published BOSARIS or speechbrain EER is checked against its own definition.
SPEAKER_METRICS = tuple(d.name for d in DEFINITIONS)


class SpeakerExtractSpec(LinearProbeExtractSpec):
    """How to make a cell's clip embeddings: a model (any encoder: audio is enough) over every
    clip of an audio folder or list file, through the extraction cache."""


class SpeakerScoreNormSpec(Spec):
    """Score normalization of a cell's trial scores over a cohort (normalization definitions
    version 1, :mod:`audiorepro.metrics.verification_norm`)."""

    method: Literal["z-norm", "t-norm", "s-norm", "as-norm"] = Field(
        description="z-norm, t-norm, s-norm or as-norm (adaptive s-norm over the top_n)"
    )
    cohort: RelativePath = Field(description="a dump with the cohort's audio_embeds")
    cohort_sha256: FileSha256
    top_n: int | None = Field(None, ge=1, description="as-norm: the highest cohort scores kept")


class SpeakerBootstrapSpec(Spec):
    """Speaker-level bootstrap intervals of a cell's EER and minDCF (bootstrap definitions
    version 1, :mod:`audiorepro.metrics.verification_bootstrap`)."""

    resamples: int = Field(1000, ge=1, description="resamples of the speakers")
    seed: int = Field(0, ge=0, description="numpy.random.default_rng's seed of the draws")
    level: float = Field(0.95, gt=0.0, lt=1.0, description="the interval's coverage")
    speakers: RelativePath | None = Field(
        None,
        description="a CSV file_name,speaker naming each clip's speaker (needed unless the "
        "trial list is VoxCeleb's, whose speaker is the first part of each clip's path)",
    )
    speakers_sha256: FileSha256 | None = None


class SpeakerCellSpec(Spec):
    """One verification: clip embeddings (a dump, or an extraction) and a trial list."""

    id: str = Field(description="a unique cell id")
    model: str = Field(description="the model's name (the table row)")
    dump: RelativePath | None = Field(None, description="a dump with audio_embeds, audio_ids")
    sha256: FileSha256 | None = None
    extract: SpeakerExtractSpec | None = None
    trials: RelativePath = Field(
        description="a trial list: the kit's CSV (enrollment,test,target), a VoxCeleb list or "
        "a NIST-style key"
    )
    trials_sha256: FileSha256
    score_norm: SpeakerScoreNormSpec | None = Field(
        None, description="normalize the trial scores over a cohort before every measure"
    )
    bootstrap: SpeakerBootstrapSpec | None = Field(
        None, description="speaker-level bootstrap intervals of the EER and minDCF"
    )


class SpeakerPublishedSpec(LinearProbePublishedSpec):
    """Published values of one speaker-verification cell, with tolerance and provenance."""

    values: dict[str, Number] = Field(
        min_length=1,
        description="definition -> published value: eer (the ROC crossing), eer_rocch, "
        "eer_pyannote, eer_speechbrain, eer_kaldi, min_dcf_p0.01, min_dcf_p0.05, "
        "min_dcf_speechbrain_p0.01, min_dcf_speechbrain_p0.05, act_dcf_p0.01, act_dcf_p0.05, "
        "cllr, min_cllr (docs/metrics.md)",
    )


class SpeakerVerificationStudyFile(StudyFile):
    """A speaker-verification study: the equal error rate of trial lists over clip
    embeddings."""

    kind: Literal["speaker-verification"] = Field(description="the study kind")
    cell: list[SpeakerCellSpec] = Field(min_length=1, description="at least one [[cell]]")
    published: list[SpeakerPublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )

    @model_validator(mode="after")
    def _no_bootstrap_or_tie_policy(self) -> SpeakerVerificationStudyFile:
        # Inherited from the common study table, but the EER has one tie rule (tied trials
        # are accepted together) and no interval: a value given here would be ignored.
        for key, why in (
            ("bootstrap", "it computes no bootstrap intervals"),
            ("tie_policy", "the EER accepts tied trials together, its one tie rule"),
        ):
            if key in self.model_fields_set:
                raise KeyProblem(
                    (key,), f"is not used by a speaker-verification study ({why}); expected none"
                )
        return self


@dataclass(frozen=True)
class SpeakerExtraction:
    model: str
    audio: Path
    registry: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"


@dataclass(frozen=True)
class SpeakerScoreNorm:
    method: Literal["z-norm", "t-norm", "s-norm", "as-norm"]
    cohort: Path
    cohort_sha256: str
    top_n: int | None


@dataclass(frozen=True)
class SpeakerBootstrap:
    resamples: int
    seed: int
    level: float
    speakers: Path | None  #: None: a VoxCeleb list's paths name the speakers
    speakers_sha256: str | None


@dataclass(frozen=True)
class SpeakerCell:
    id: str
    model: str
    dump: Path | None
    sha256: str | None
    extract: SpeakerExtraction | None
    trials: Path
    trials_sha256: str
    score_norm: SpeakerScoreNorm | None = None
    bootstrap: SpeakerBootstrap | None = None


@dataclass(frozen=True)
class SpeakerVerificationStudy:
    """A speaker-verification study, loaded."""

    name: str
    title: str
    source: Path
    cells: tuple[SpeakerCell, ...]
    published: tuple[Published, ...]
    kind: Literal["speaker-verification"] = "speaker-verification"
    selection: Selection | None = None


def _speaker_clips(cell: SpeakerCell, where: str) -> tuple[tuple[str, ...], str]:
    """The clips a cell's embeddings will have (its audio folder's, or its dump's ids), and
    what holds them (for the trial list's messages)."""
    if cell.extract is not None:
        audio = cell.extract.audio
        return tuple(list_audio(audio)), f"{audio} ({where}.extract.audio)"
    assert cell.dump is not None
    return read_clip_embeddings(cell.dump).ids, f"dump {cell.dump.name} ({where}.dump)"


def _speaker_bootstrap(
    b: SpeakerBootstrapSpec | None, source: Path, where: str, strict: bool
) -> SpeakerBootstrap | None:
    if b is None:
        return None
    speakers = study_path(source, f"{where}.bootstrap.speakers", b.speakers, must_exist=strict)
    if (speakers is None) != (b.speakers_sha256 is None):
        raise UserError("expected speakers and speakers_sha256 together", source=source,
                        key=f"{where}.bootstrap.speakers_sha256")  # fmt: skip
    if strict and speakers is not None:
        check_hashes([(speakers, b.speakers_sha256, "bootstrap.speakers_sha256")], source, where)
    return SpeakerBootstrap(b.resamples, b.seed, b.level, speakers, b.speakers_sha256)


def _check_speakers(boot: SpeakerBootstrap, trials: Trials, source: Path, where: str) -> None:
    """Every trial's two speakers known before any work (one line, exit 2)."""
    if boot.speakers is None:
        if trials.format != "voxceleb":
            raise UserError(
                f"names no speakers, and {trials.source} is a {trials.format} trial list (only "
                "a VoxCeleb list names them, as each clip's first path part); expected "
                "bootstrap.speakers: a CSV file_name,speaker", source=source,
                key=f"{where}.bootstrap.speakers",
            )  # fmt: skip
        return
    trial_speakers(trials, read_speakers(boot.speakers), source=str(boot.speakers))


def _speaker_cell(c: SpeakerCellSpec, i: int, source: Path, strict: bool) -> SpeakerCell:
    where = f"cell[{i}]"
    dump_or_extract(c.dump, c.sha256, c.extract is not None, source, where)
    trials = required_path(source, f"{where}.trials", c.trials, must_exist=strict)
    dump = study_path(source, f"{where}.dump", c.dump, must_exist=False)
    if strict:
        files = ((trials, c.trials_sha256, "trials_sha256"), (dump, c.sha256, "sha256"))
        check_hashes(files, source, where)
    extract = None
    if c.extract is not None:
        e = c.extract
        check_settings(e.settings, source=f"{source}: {where}.extract.settings")
        registry = study_path(source, f"{where}.extract.registry", e.registry, must_exist=True)
        audio = required_path(source, f"{where}.extract.audio", e.audio, must_exist=strict)
        extract = SpeakerExtraction(e.model, audio, registry, dict(e.settings), e.device)
    score_norm = None
    if c.score_norm is not None:
        n = c.score_norm
        if (n.method == "as-norm") != (n.top_n is not None):
            need = "as-norm needs top_n" if n.top_n is None else f"{n.method} takes none"
            raise UserError(f"{need}; expected top_n with as-norm only", source=source,
                            key=f"{where}.score_norm.top_n")  # fmt: skip
        cohort = required_path(source, f"{where}.score_norm.cohort", n.cohort, must_exist=strict)
        if strict:
            check_hashes([(cohort, n.cohort_sha256, "score_norm.cohort_sha256")], source, where)
        score_norm = SpeakerScoreNorm(n.method, cohort, n.cohort_sha256, n.top_n)
    boot = _speaker_bootstrap(c.bootstrap, source, where, strict)
    cell = SpeakerCell(c.id, c.model, dump, c.sha256, extract, trials, c.trials_sha256, score_norm,
                       boot)  # fmt: skip
    if strict and trials.is_file() and (dump is None or dump.is_file()):
        # The trial list read and its clips found before any work: one line, exit 2.
        clips, within = _speaker_clips(cell, where)
        check_clips(read_trials(trials), clips, within=within)
    if strict and boot is not None and trials.is_file():
        _check_speakers(boot, read_trials(trials), source, where)
    return cell


def _speaker_metric(metric: str) -> str | None:
    if metric in SPEAKER_METRICS:
        return None
    return f"unknown speaker-verification metric; expected {', '.join(SPEAKER_METRICS)}"


def parse_speaker_verification(
    doc: dict[str, Any], source: Path, strict: bool
) -> SpeakerVerificationStudy:
    spec = validate(SpeakerVerificationStudyFile, doc, source=str(source))
    cells = unique_cells(source, spec.cell, lambda c, i: _speaker_cell(c, i, source, strict))
    ids = {c.id for c in cells}
    published = cell_published(source, spec.published, ids, _speaker_metric, "eer", spec.tie_policy)
    return SpeakerVerificationStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        cells=tuple(cells),
        published=published,
    )
