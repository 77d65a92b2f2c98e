"""Signed output folders: an in-toto attestation of a run, in a DSSE envelope, Ed25519-signed.

``manifest.json`` certifies the folder only to itself: whoever rewrites a table and its SHA-256
in the manifest has a folder that ``verify OUT`` passes. ``audiorepro sign OUT --key KEY``
(and ``reproduce --sign-key KEY``, in staging, before the folder is published) writes
``OUT/attestation.intoto.json`` (:data:`~.publish.ATTESTATION`), which only the key's holder
can write:

- the *statement* is an in-toto Statement v1 (``_type`` :data:`STATEMENT_TYPE`): one
  ``subject`` per file of the run (``manifest.json`` and every file it lists, the nested
  studies' included; not the cache, not the attestation), ``{"name": path, "digest":
  {"sha256": hex}}``, sorted by name; ``predicateType`` :data:`PREDICATE_TYPE`; and a
  ``predicate`` (:class:`RunPredicate`) taken from the manifest: the study's name, file and
  SHA-256, the inputs' SHA-256, an environment summary, the git state, the run's time;
- the *envelope* is DSSE: ``payloadType`` :data:`PAYLOAD_TYPE`, ``payload`` the statement's
  canonical JSON (sorted keys, no spaces) in standard base64, ``signatures`` ``[{"keyid",
  "sig"}]``, ``sig`` the base64 Ed25519 signature of :func:`pae` (DSSE's pre-authentication
  encoding) of the payload type and payload bytes; ``keyid`` :func:`.keys.keyid_of`.

Ed25519 signatures are deterministic and both JSON texts have sorted keys, so signing the same
folder with the same key writes the same bytes. ``verify OUT --key PUB`` (:func:`check_signature`)
accepts the folder only when a signature verifies under a trusted key and the signed subjects
are exactly the folder's files with those digests; without a key it says whether the folder is
signed, and by which key id (not verified).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from typing_extensions import TypedDict

from audiorepro import __version__
from audiorepro.checks.verdict import ValueRow, check_failed
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps, read_text
from audiorepro.runner.output.publish import ATTESTATION, run_files
from audiorepro.specs.records import ManifestRecord, read_record, safe_relative

if TYPE_CHECKING:  # cryptography is imported when a signature is made or checked
    from audiorepro.runner.output.keys import SigningKey, TrustedKey

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://audiorepro.dev/attestation/run/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
#: A folder is signed by one key; a few co-signers are plausible, thousands are an attack.
MAX_SIGNATURES = 16
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: The manifest's environment keys the predicate summarizes (the manifest keeps the rest).
ENVIRONMENT_KEYS = ("python", "implementation", "platform", "machine", "packages", "container")


class Digest(TypedDict):
    sha256: str


class Subject(TypedDict):
    """One file of the run: its path in OUT and its SHA-256."""

    name: str
    digest: Digest


class RunPredicate(TypedDict):
    """What was run, on what, where: taken from the top-level manifest as it is."""

    #: name, file and sha256 of the study file
    study: Any
    #: input file name -> SHA-256
    inputs: Any
    #: a summary of the manifest's environment (:data:`ENVIRONMENT_KEYS`)
    environment: dict[str, object]
    git: Any
    time: Any
    #: the audiorepro version that signed
    signer: str


class Statement(TypedDict):
    """An in-toto Statement v1 of a run."""

    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: RunPredicate


class Signature(TypedDict):
    keyid: str
    sig: str


class Envelope(TypedDict):
    """A DSSE envelope."""

    payloadType: str
    payload: str
    signatures: list[Signature]


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding, what is signed:
    ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` (lengths: ASCII decimal bytes).

    >>> pae("application/x", b"hi")
    b'DSSEv1 13 application/x 2 hi'
    """
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(body), body)


def subjects(out: Path) -> list[Subject]:
    """Every file of the run in ``out``, checked against its manifest: a folder whose files
    differ from what its manifest lists is refused (signing would certify the change)."""
    manifest, _ = read_record(out / "manifest.json", ManifestRecord)
    assert isinstance(manifest, ManifestRecord)
    names = run_files(out)
    for rel in ["manifest.json", *names]:
        if (out / rel).is_symlink():
            raise UserError(f"holds a symbolic link {rel}; expected the files of a run", source=out)
    digests = {rel: sha256_file(out / rel) for rel in names}
    if digests != manifest.outputs:
        changed = sorted(set(digests.items()) ^ set(manifest.outputs.items()))
        raise UserError(
            f"does not match its manifest.json ({changed[0][0]} and {len(changed) - 1} more "
            "differ); run `audiorepro verify` on it, and sign only an intact folder",
            source=out,
        )
    digests["manifest.json"] = sha256_file(out / "manifest.json")
    return [{"name": rel, "digest": {"sha256": digests[rel]}} for rel in sorted(digests)]


def predicate(out: Path) -> RunPredicate:
    """The run record of ``out``'s top-level manifest (a pipeline wrote it: read as it is)."""
    _, raw = read_record(out / "manifest.json", ManifestRecord)
    env = raw.get("environment")
    env = env if isinstance(env, dict) else {}
    return {
        "study": raw.get("study"),
        "inputs": raw.get("inputs"),
        "environment": {k: env.get(k) for k in ENVIRONMENT_KEYS},
        "git": raw.get("git"),
        "time": raw.get("time"),
        "signer": f"audiorepro {__version__}",
    }


def canonical(obj: Any) -> bytes:
    """The payload bytes: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def envelope_of(statement: Statement, key: SigningKey) -> Envelope:
    body = canonical(statement)
    sig = key.private.sign(pae(PAYLOAD_TYPE, body))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
    }


def sign_folder(out: Path, key: SigningKey) -> Statement:
    """Write ``out``'s attestation, signed with ``key`` (replacing an earlier one)."""
    statement: Statement = {
        "_type": STATEMENT_TYPE,
        "subject": subjects(out),
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate(out),
    }
    atomic_write_bytes(out / ATTESTATION, json_dumps(envelope_of(statement, key)).encode())
    return statement


def _b64(text: object, source: Path, key: str) -> bytes:
    if not isinstance(text, str):
        raise UserError("is not a string; expected base64", source=source, key=key)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UserError("is not valid base64", source=source, key=key) from None


@dataclass(frozen=True)
class ReadEnvelope:
    """An attestation file's envelope: the payload bytes and each (keyid, signature)."""

    body: bytes
    signatures: list[tuple[str, bytes]]


def read_envelope(path: Path) -> ReadEnvelope:
    """The DSSE envelope in ``path``, checked for shape only (exit 2 when it is broken)."""
    what = "the DSSE envelope `audiorepro sign` writes"
    if path.is_symlink():
        raise UserError(f"is a symbolic link; expected {what}", source=path)
    text = read_text(path, what=what)  # its own one line (a FIFO, too large, not UTF-8)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad JSON, a 5000-digit integer, deep nesting
        raise UserError(f"is not valid JSON ({exc}); expected {what}", source=path) from None
    if not isinstance(data, dict) or set(data) != {"payloadType", "payload", "signatures"}:
        raise UserError(
            f"is not a DSSE envelope; expected {what} (keys payloadType, payload, signatures)",
            source=path,
        )
    if data["payloadType"] != PAYLOAD_TYPE:
        raise UserError(f"is not {PAYLOAD_TYPE!r}", source=path, key="payloadType")
    sigs = data["signatures"]
    if not isinstance(sigs, list) or not 1 <= len(sigs) <= MAX_SIGNATURES:
        raise UserError(
            f"is not a list of 1 to {MAX_SIGNATURES} signatures", source=path, key="signatures"
        )
    read: list[tuple[str, bytes]] = []
    for i, sig in enumerate(sigs):
        where = f"signatures[{i}]"
        if not isinstance(sig, dict) or not isinstance(sig.get("keyid"), str):
            raise UserError("is not {keyid, sig}", source=path, key=where)
        raw = _b64(sig.get("sig"), path, f"{where}.sig")
        if len(raw) != 64:
            raise UserError("is not an Ed25519 signature (64 bytes)", source=path, key=where)
        read.append((sig["keyid"], raw))
    return ReadEnvelope(_b64(data["payload"], path, "payload"), read)


def signed_by(env: ReadEnvelope, trusted: list[TrustedKey]) -> TrustedKey | None:
    """The first trusted key under which some signature verifies (keyids are only hints)."""
    from cryptography.exceptions import InvalidSignature

    message = pae(PAYLOAD_TYPE, env.body)
    for key in trusted:
        for _, sig in env.signatures:
            try:
                key.public.verify(sig, message)
            except InvalidSignature:
                continue
            return key
    return None


def _subject(item: object, source: Path, key: str) -> Subject:
    if not isinstance(item, dict) or not isinstance(item.get("digest"), dict):
        raise UserError("is not {name, digest: {sha256}}", source=source, key=key)
    name, digest = item.get("name"), item["digest"].get("sha256")
    try:
        safe_relative(name if isinstance(name, str) else "")
    except ValueError:
        raise UserError(f"name {name!r} is not a path inside OUT", source=source, key=key) from None
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise UserError("digest.sha256 is not 64 hex digits", source=source, key=key)
    assert isinstance(name, str)
    return {"name": name, "digest": {"sha256": digest}}


def read_statement(body: bytes, source: Path) -> list[Subject]:
    """The subjects of a signed statement (its shape checked: exit 2 when broken)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"is not JSON ({exc})", source=source, key="payload") from None
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        raise UserError(f"is not an in-toto statement ({STATEMENT_TYPE})", source=source,
                        key="payload._type")  # fmt: skip
    if data.get("predicateType") != PREDICATE_TYPE:
        raise UserError(f"is not {PREDICATE_TYPE}", source=source, key="payload.predicateType")
    items = data.get("subject")
    if not isinstance(items, list):
        raise UserError("is not a list", source=source, key="payload.subject")
    found = [_subject(item, source, f"payload.subject[{i}]") for i, item in enumerate(items)]
    names = [s["name"] for s in found]
    if len(set(names)) != len(names):
        raise UserError("names a file twice", source=source, key="payload.subject")
    return found


@dataclass(frozen=True)
class SignatureCheck:
    """What ``verify OUT`` says of the signature: one line, and a FAIL row per problem."""

    line: str
    rows: list[ValueRow]


def _row(name: str, reason: str) -> ValueRow:
    return check_failed("signature", name, reason)


def _subject_rows(out: Path, signed: list[Subject]) -> list[ValueRow]:
    """Each signed subject against the file, and each file of the run that is no subject."""
    rows = []
    for subject in signed:
        path, name = out / subject["name"], subject["name"]
        if not path.is_file() or path.is_symlink():
            rows.append(_row(name, "a signed subject is missing"))
        elif sha256_file(path) != subject["digest"]["sha256"]:
            rows.append(_row(name, "SHA-256 differs from the signed attestation"))
    manifest = out / "manifest.json"
    files = run_files(out) + (
        ["manifest.json"] if manifest.exists() or manifest.is_symlink() else []
    )
    names = {s["name"] for s in signed}
    rows += [_row(rel, "not a subject of the signed attestation") for rel in sorted(files)
             if rel not in names]  # fmt: skip
    return rows


def check_signature(out: Path, trusted: list[TrustedKey] | None) -> SignatureCheck:
    """The signature of ``out``: without ``trusted`` keys, only whether it is signed and by
    which key id (claimed, not verified); with them, verified and compared file by file."""
    path = out / ATTESTATION
    if not (path.exists() or path.is_symlink()):
        line = f"signature: unsigned (no {ATTESTATION}; `audiorepro sign OUT --key KEY` signs it)"
        missing = [_row(ATTESTATION, "missing: the folder is not signed")]
        return SignatureCheck(line, missing if trusted is not None else [])
    env = read_envelope(path)
    claimed = ", ".join(keyid for keyid, _ in env.signatures)
    if trusted is None:
        return SignatureCheck(
            f"signature: signed by {claimed}, not verified against a trusted key "
            "(verify OUT --key PUBLIC_KEY checks it)",
            [],
        )
    key = signed_by(env, trusted)
    if key is None:
        ids = ", ".join(k.keyid for k in trusted)
        reason = f"no signature verifies under a trusted key ({ids}); it claims {claimed}"
        return SignatureCheck("signature: NOT verified", [_row(ATTESTATION, reason)])
    signed = read_statement(env.body, path)
    rows = _subject_rows(out, signed)
    verdict = "verified" if not rows else "verified, but the folder differs from it"
    return SignatureCheck(
        f"signature: {verdict}; signed by {key.keyid} (trusted key {key.source}), "
        f"{len(signed)} subjects",
        rows,
    )
