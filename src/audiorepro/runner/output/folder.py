"""An output folder of ``reproduce`` read back: every file against the manifest's SHA-256,
its recorded checks (the nested studies' too) and what they rest on, as ``verify OUT`` and
``diff`` need it. It runs no study and imports no kind: ``verify OUT`` pays for reading the
folder, not for the stacks that wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiorepro.checks.verdict import (
    PASS,
    Summary,
    ValueRow,
    check_failed,
    recheck,
    settle,
    summarize,
)
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject
from audiorepro.runner.output.attest import check_signature
from audiorepro.runner.output.publish import publication_state, run_files
from audiorepro.specs.records import ManifestRecord, VerificationRecord, read_record

if TYPE_CHECKING:  # cryptography is imported only where a key is read (--key)
    from audiorepro.runner.output.keys import TrustedKey


def trusted_keys_of(keys: tuple[Path, ...], keys_file: Path | None) -> list[TrustedKey] | None:
    """The trusted keys of ``--key`` and ``--trusted-keys`` (None without either): only then
    is cryptography imported, so that ``verify OUT`` and ``diff`` without a key never load it
    (issue 48 item 4)."""
    if not keys and keys_file is None:
        return None
    from audiorepro.runner.output.keys import load_trusted_keys

    return load_trusted_keys(keys, keys_file)


def folder_problem(out: Path, trusted: list[TrustedKey] | None = None) -> str | None:
    """The first file of ``out`` that does not hold what its run wrote (against the
    manifest's SHA-256; against the signature too with ``trusted`` keys), as ``file: why``;
    None when every file does. What ``diff`` checks of each side before comparing."""
    rows = [r for r in verify_output_dir(out)["rows"] if r["cell"] == "output"]
    rows += check_signature(out, trusted).rows if trusted is not None else []
    return next((f"{r['metric']}: {r['reason']}" for r in rows), None)


def _output_row(rel: str, reason: str) -> ValueRow:
    return check_failed("output", rel, reason)


def _check_rows(where: str, record: VerificationRecord, raw: JsonObject) -> list[ValueRow]:
    """A study's recorded checks other than its published values: each failure, a failed
    metric parity (its flag, or a parity cell that did not pass: the verdict line counts
    them, so a flag saying otherwise must not pass), an incomplete probe study."""
    reasons = [f"failure: {f}" for f in record.failures]
    parity = raw.get("metric_parity")
    cells = parity.get("cells") if isinstance(parity, dict) else None
    failed = [c for c in cells or [] if not (isinstance(c, dict) and c.get("passed") is True)]
    if record.metric_parity_passed is False:
        reasons.append("metric parity did not pass")
    elif failed and not record.failures:  # every kind records a failed cell as a failure
        cell = failed[0].get("cell") if isinstance(failed[0], dict) else None
        reasons.append(
            f"metric parity of {len(failed)} cell(s) did not pass (first: {cell!r}), though "
            "the record lists no failure"
        )
    if record.probe_complete is False:
        reasons.append("the probe study is incomplete")
    return [{**_output_row(where, reason), "cell": "check"} for reason in reasons]


def verify_output_dir(out: Path) -> Summary:
    """Re-read a reproduce output folder: its published-value rows and recorded checks (of
    the nested studies too), every output file against the manifest's SHA-256, and no file
    the run did not write (each problem is a FAIL row naming it)."""
    out = Path(out)
    state = publication_state(out)
    if state is not None:
        raise UserError(state, source=out)
    try:
        summary = _verify_output_dir(out)
    except (FileNotFoundError, NotADirectoryError) as exc:
        # Every missing output is a row: an entry that vanishes while read is a publication.
        raise UserError(
            f"changed while it was verified ({exc.filename} vanished: a run published into it "
            "meanwhile); verify it again",
            source=out,
        ) from None
    except UserError:
        # A file that vanished between being listed and being hashed ("no such file") is
        # the same race when a publication began meanwhile: say that, not the symptom.
        state = publication_state(out)
        if state is not None:
            raise UserError(f"changed while it was verified: it {state}", source=out) from None
        raise
    state = publication_state(out)  # a publication that began meanwhile
    if state is not None:
        raise UserError(f"changed while it was verified: it {state}", source=out)
    return summary


def _verify_output_dir(out: Path) -> Summary:
    for name in ("verification.json", "manifest.json"):
        if (out / name).is_symlink():
            # A run writes both as files: a link certifies whatever it points at.
            raise UserError(
                f"is a symbolic link (a run writes files, never symbolic links); expected "
                f"the {name} file a run wrote",
                source=out / name,
            )
        if not (out / name).exists():  # else read_record says
            raise UserError(f"has no {name}; expected the output folder of reproduce", source=out)
    top, raw = read_record(out / "verification.json", VerificationRecord)
    manifest, _ = read_record(out / "manifest.json", ManifestRecord)
    assert isinstance(top, VerificationRecord) and isinstance(manifest, ManifestRecord)
    rows: list[ValueRow] = [recheck(row) for row in raw["golden"]["rows"]]
    rows += _check_rows("verification.json", top, raw)
    outputs = manifest.outputs
    intact = set()
    for rel, expected in sorted(outputs.items()):
        path = out / rel
        got = sha256_file(path) if path.is_file() and not path.is_symlink() else None
        if got is None:
            rows.append(_output_row(rel, "missing"))
        elif got != expected:
            rows.append(_output_row(rel, "SHA-256 differs from manifest.json"))
        else:
            intact.add(rel)
    for rel in run_files(out):
        if rel not in outputs:
            rows.append(_output_row(rel, "not written by this run (not in manifest.json)"))
    records = [raw]
    for rel in sorted(intact):
        # A nested study's record (an intact one: a changed file is already a FAIL).
        if rel.endswith("/verification.json"):
            nested, nested_raw = read_record(out / rel, VerificationRecord)
            assert isinstance(nested, VerificationRecord)
            rows += _check_rows(rel, nested, nested_raw)
            # its rows that did not pass are among its failures; a PASS row is checked here
            folder = rel.rsplit("/", 1)[0]
            for row in nested_raw["golden"]["rows"]:
                if (checked := recheck(row)) is not row:
                    rows.append({**checked, "cell": f"{folder}/{checked['cell']}"})
            records.append(nested_raw)
    summary = summarize(rows)
    summary["checked"], checks = _checked(len(intact), len(outputs), records)
    return settle(summary, checks, OUT_TO_CHECK)


#: What gives ``verify OUT`` something to check, said when its run recorded no check.
OUT_TO_CHECK = (
    "its run recorded no published value, metric parity, identity check, gate or completion "
    "rule; add published values to the study (or predictions for parity) and run it again"
)


def _checked(intact: int, listed: int, records: Sequence[JsonObject]) -> tuple[str, int]:
    """What ``verify OUT`` checked, for its verdict line: files against the manifest, and
    what the run's records (the nested studies' too) say passed of parity, identity,
    completion rules, gates and published values; and how many such checks there were
    besides the published values (the files alone check no number). The records were
    written by a run: read as they are."""

    def items(record: JsonObject, *keys: str) -> list[Any]:
        value: Any = record
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, list) else []

    parity = [c for r in records for c in items(r, "metric_parity", "cells")]
    parity_ok = sum(1 for c in parity if isinstance(c, dict) and c.get("passed") is True)
    identity = [b for r in records for b in items(r, "checkpoint_identities")]
    identity_failed = sum(
        1 for r in records for f in items(r, "failures") if str(f).startswith("identity ")
    )
    golden = [g for r in records for g in items(r, "golden", "rows")]
    golden_ok = sum(1 for g in golden if isinstance(g, dict) and g.get("status") == PASS)
    rests = [r.get("rests_on") for r in records]
    probe_counts = {
        what: sum(v.get(what, 0) for v in rests if isinstance(v, dict) and _count(v.get(what)))
        for what in ("completion", "gates")
    }
    text = (
        f"{intact}/{listed} files against the manifest, parity {parity_ok}/{len(parity)}, "
        f"identity {len(identity) - identity_failed}/{len(identity)}, "
        f"published {golden_ok}/{len(golden)}"
    )
    if any(isinstance(v, dict) for v in rests):
        text += f", completion {probe_counts['completion']} run(s), gates {probe_counts['gates']}"
    return text, len(parity) + len(identity) + probe_counts["completion"] + probe_counts["gates"]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def recorded_nothing(out: Path) -> bool:
    """Whether the run just written to ``out`` recorded no check at all (its own
    ``verification.json`` and its nested studies'): no published value, metric parity,
    identity check, gate or completion rule. ``reproduce`` then says NOTHING CHECKED rather
    than PASSED, as ``verify OUT`` would (a run's files alone check no number)."""
    paths = [out / "verification.json", *sorted(out.glob("*/verification.json"))]
    records: list[JsonObject] = []
    for path in paths:
        if path.is_file() and not path.is_symlink():
            _, raw = read_record(path, VerificationRecord)
            records.append(raw)
    golden = [r.get("golden") for r in records]
    rows = sum(len(g.get("rows") or []) for g in golden if isinstance(g, dict))
    _, checks = _checked(0, 0, records)
    return rows + checks == 0
