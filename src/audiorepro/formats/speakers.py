"""Who speaks in each clip of a trial list: the speakers the speaker-level bootstrap resamples
(:mod:`audiorepro.metrics.verification_bootstrap`).

A VoxCeleb list names its speaker as the first part of each clip's path
(``id10270/x6uYqmx31kE/00001.wav``: ``id10270``). The kit's CSV and NIST-style keys name
clips only, so their speakers come from a speakers file: a CSV with a header and the columns
``file_name`` (the clip as the trial list names it) and ``speaker`` (other columns are not
read), as ``fixtures/speech/speakers.csv``::

    file_name,speaker
    spk1_01.wav,spk1

Refused, one line naming the file and the key: a missing column, a clip listed twice, an
empty speaker, a trial's clip the file lacks, and a target trial whose two clips the file
gives two speakers.

>>> voxceleb_speaker("id10270/x6uYqmx31kE/00001.wav")
'id10270'
>>> parse_speakers("file_name,speaker\\na.wav,s1\\nb.wav,s2\\n", source="speakers.csv")
{'a.wav': 's1', 'b.wav': 's2'}
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_text
from audiorepro.formats.trials import Trials

COLUMNS = ("file_name", "speaker")


def voxceleb_speaker(clip: str) -> str:
    """A VoxCeleb clip's speaker: the first part of its path."""
    return clip.split("/", 1)[0]


def parse_speakers(text: str, *, source: str) -> dict[str, str]:
    """clip -> speaker from a speakers file's text (module docstring)."""
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"))))
    header = [h.strip() for h in rows[0]] if rows else []
    for column in COLUMNS:
        if column not in header:
            raise UserError(f"lacks column {column!r}; expected a header file_name,speaker",
                            source=source, key="header")  # fmt: skip
    at = header.index("file_name"), header.index("speaker")
    out: dict[str, str] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UserError(f"has {len(row)} fields; expected {len(header)} as in the header",
                            source=source, key=f"row {n}")  # fmt: skip
        clip, speaker = row[at[0]].strip(), row[at[1]].strip()
        if not speaker:
            raise UserError("is empty; expected the clip's speaker", source=source,
                            key=f"row {n}.speaker")  # fmt: skip
        if clip in out:
            raise UserError(f"lists clip {clip!r} again; expected each clip once",
                            source=source, key=f"row {n}.file_name")  # fmt: skip
        out[clip] = speaker
    return out


def read_speakers(path: str | Path) -> dict[str, str]:
    """A speakers file (module docstring), or one line naming it and what is wrong."""
    return parse_speakers(read_text(path, what="a speakers file"), source=str(path))


def trial_speakers(
    trials: Trials, speakers: dict[str, str] | None, *, source: str
) -> tuple[list[str], list[str]]:
    """Each trial's enrollment and test speaker: from ``speakers`` (read from ``source``), or
    from a VoxCeleb list's paths when None."""
    if speakers is None:
        return [voxceleb_speaker(c) for c in trials.enrollment], [
            voxceleb_speaker(c) for c in trials.test
        ]
    for clip in trials.clips():
        if clip not in speakers:
            raise UserError(f"lacks clip {clip!r}, which {trials.source} names; expected a row "
                            "for every clip of the trial list", source=source,
                            key="file_name")  # fmt: skip
    enr = [speakers[c] for c in trials.enrollment]
    test = [speakers[c] for c in trials.test]
    rows = trials.rows or tuple(range(2, 2 + len(test)))
    for k in range(len(test)):
        if trials.target[k] and enr[k] != test[k]:
            raise UserError(
                f"is a target trial of two speakers by {source} ({enr[k]!r}, {test[k]!r}); "
                "expected one speaker", source=trials.source, key=f"row {rows[k]}.target",
            )  # fmt: skip
    return enr, test
