"""Signed output folders (issue 24, item 4): ``audiorepro sign``, ``verify OUT --key`` and
``reproduce --sign-key``, with keys made by the real ``openssl`` and ``ssh-keygen`` and by
``cryptography``; the DSSE envelope checked against a PAE computed here, independently."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audiorepro.cli import main
from tests.conftest import ROOT
from tests.test_hostile import _one_line
from tests.test_outputs_folder import _study

ATTESTATION = "attestation.intoto.json"


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (apt-get install openssl openssh-client)")
    return path


def _openssl_pair(folder: Path, algorithm: str = "ed25519") -> KeyPair:
    openssl = _tool("openssl")
    private, public = folder / f"{algorithm}.pem", folder / f"{algorithm}.pub.pem"
    subprocess.run([openssl, "genpkey", "-algorithm", algorithm, "-out", private], check=True)
    subprocess.run([openssl, "pkey", "-in", private, "-pubout", "-out", public], check=True)
    return KeyPair(private, public)


def _ssh_pair(folder: Path, kind: str = "ed25519", passphrase: str = "") -> KeyPair:
    private = folder / f"id_{kind}{'_enc' if passphrase else ''}"
    subprocess.run(
        [_tool("ssh-keygen"), "-q", "-t", kind, "-N", passphrase, "-C", "tester", "-f", private],
        check=True,
    )
    return KeyPair(private, Path(f"{private}.pub"))


def _cryptography_pair(folder: Path, fmt: str) -> KeyPair:
    key = Ed25519PrivateKey.generate()
    s = serialization
    if fmt == "pem":
        private = key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())
        public = key.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo)
    else:
        private = key.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH, s.NoEncryption())
        public = key.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH)
    pair = KeyPair(folder / f"crypto-{fmt}.key", folder / f"crypto-{fmt}.pub")
    pair.private.write_bytes(private)
    pair.public.write_bytes(public + b"\n")
    return pair


MAKERS: dict[str, Callable[[Path], KeyPair]] = {
    "openssl": _openssl_pair,
    "ssh-keygen": _ssh_pair,
    "cryptography-pem": lambda d: _cryptography_pair(d, "pem"),
    "cryptography-openssh": lambda d: _cryptography_pair(d, "openssh"),
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    folder = tmp_path_factory.mktemp("keys")
    return {name: make(folder) for name, make in MAKERS.items()}


@pytest.fixture(scope="module")
def unsigned_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small run (two cells over fixture dumps), copied by each test that changes it."""
    folder = tmp_path_factory.mktemp("run")
    out = folder / "out"
    assert main(["reproduce", str(_study(folder)), "--out", str(out)]) == 0
    return out


@pytest.fixture
def run(unsigned_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(unsigned_run, out, symlinks=True)
    return out


def _sign(out: Path, key: Path) -> int:
    return main(["sign", str(out), "--key", str(key)])


def _verify(out: Path, *keys: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", str(out), *[a for k in keys for a in ("--key", str(k))]])
    return code, capsys.readouterr().out


def _run_files(out: Path) -> dict[str, str]:
    """Every file of the run, hashed here (the cache and the attestation are not the run's)."""
    found = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and rel != ATTESTATION and not rel.startswith(("cache/", "slurm/")):
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _rehash(out: Path, rel: str) -> None:
    """Write ``rel``'s SHA-256 into the manifest: the consistent rewrite a forger does."""
    manifest = json.loads((out / "manifest.json").read_text())
    if (out / rel).exists():
        manifest["outputs"][rel] = hashlib.sha256((out / rel).read_bytes()).hexdigest()
    else:
        del manifest["outputs"][rel]
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))


def _fingerprint(public: Path) -> str:
    """The OpenSSH fingerprint of a public key: ``ssh-keygen -lf`` for an SSH line; for a PEM
    key (which ssh-keygen cannot import for Ed25519), the SHA-256 of the SSH wire blob built
    here from the raw key that ``openssl pkey -outform DER`` gives (its last 32 bytes)."""
    if not public.read_text().startswith("-----"):
        listed = subprocess.run(
            [_tool("ssh-keygen"), "-lf", public], check=True, capture_output=True, text=True
        )
        return listed.stdout.split()[1]
    der = subprocess.run(
        [_tool("openssl"), "pkey", "-pubin", "-in", public, "-outform", "DER"],
        check=True,
        capture_output=True,
    ).stdout
    kind, raw = b"ssh-ed25519", der[-32:]
    blob = len(kind).to_bytes(4, "big") + kind + len(raw).to_bytes(4, "big") + raw
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's PAE, written from the specification (not from audiorepro's code)."""
    t = payload_type.encode("utf-8")
    return b" ".join([b"DSSEv1", str(len(t)).encode(), t, str(len(body)).encode(), body])


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_sign_and_verify_round_trip_with_every_key_format(
    maker: str, keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = keys[maker]
    assert _sign(run, pair.private) == 0
    fingerprint = _fingerprint(pair.public)
    assert fingerprint.startswith("SHA256:")
    assert fingerprint in capsys.readouterr().out
    code, out = _verify(run, pair.public, capsys=capsys)
    assert code == 0, out
    assert f"signature: verified; signed by {fingerprint}" in out
    others = [keys[m].public for m in sorted(MAKERS) if m != maker]
    assert _verify(run, *others, capsys=capsys)[0] == 1  # only the signer's key verifies
    assert _verify(run, *others, pair.public, capsys=capsys)[0] == 0  # one of several trusted


def test_envelope_is_dsse_over_an_in_toto_statement_of_every_file(
    keys: dict[str, KeyPair], run: Path
) -> None:
    pair = keys["openssl"]
    assert _sign(run, pair.private) == 0
    envelope = json.loads((run / ATTESTATION).read_text())
    assert sorted(envelope) == ["payload", "payloadType", "signatures"]
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    body = base64.b64decode(envelope["payload"], validate=True)
    [signature] = envelope["signatures"]
    assert signature["keyid"] == _fingerprint(pair.public)
    public = serialization.load_pem_public_key(pair.public.read_bytes())
    # Raises InvalidSignature unless the signature is over PAE(type, body).
    public.verify(base64.b64decode(signature["sig"]), _pae(envelope["payloadType"], body))  # type: ignore[union-attr, call-arg]
    statement = json.loads(body)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://audiorepro.dev/attestation/run/v1"
    expected = _run_files(run)
    assert "manifest.json" in expected
    assert statement["subject"] == [
        {"name": rel, "digest": {"sha256": sha}} for rel, sha in sorted(expected.items())
    ]
    manifest = json.loads((run / "manifest.json").read_text())
    predicate = statement["predicate"]
    assert predicate["study"] == manifest["study"]
    assert predicate["inputs"] == manifest["inputs"]
    assert predicate["environment"]["python"] == manifest["environment"]["python"]
    assert predicate["environment"]["packages"] == manifest["environment"]["packages"]
    assert predicate["time"] == manifest["time"]


def test_signing_is_deterministic(keys: dict[str, KeyPair], run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    assert _sign(run, keys["ssh-keygen"].private) == 0
    assert _sign(copy, keys["ssh-keygen"].private) == 0
    first = (run / ATTESTATION).read_bytes()
    assert first == (copy / ATTESTATION).read_bytes()
    assert _sign(run, keys["ssh-keygen"].private) == 0  # re-signing replaces it, same bytes
    assert (run / ATTESTATION).read_bytes() == first
    text = first.decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def test_a_consistent_rewrite_passes_the_manifest_but_not_the_signature(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    table = run / "tables" / "parity.csv"
    table.write_text(table.read_text().replace("0.", "0.9", 1))
    _rehash(run, "tables/parity.csv")
    code, out = _verify(run, capsys=capsys)
    assert code == 0, out  # the manifest certifies itself: the forgery passes
    assert "not verified against a trusted key" in out
    code, out = _verify(run, keys["openssl"].public, capsys=capsys)
    assert code == 1
    assert "tables/parity.csv  published -" in out
    assert "SHA-256 differs from the signed attestation" in out
    bad = [line.split()[2] for line in out.splitlines() if line.startswith("FAIL  ") and
           " signature " in line]  # fmt: skip
    assert bad == ["manifest.json", "tables/parity.csv"], out  # the rewritten ones, no others


def test_a_wrong_key_fails(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    code, out = _verify(run, keys["ssh-keygen"].public, capsys=capsys)
    assert code == 1
    assert "no signature verifies under a trusted key" in out
    assert "signature: NOT verified" in out


def test_a_tampered_payload_fails(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forger who also rewrites the signed statement (to match the rewritten table) has a
    payload the signature does not cover."""
    assert _sign(run, keys["openssl"].private) == 0
    table = run / "tables" / "parity.csv"
    table.write_text(table.read_text() + "forged,row\n")
    _rehash(run, "tables/parity.csv")
    path = run / ATTESTATION
    envelope = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    for subject in statement["subject"]:
        if subject["name"] == "tables/parity.csv":
            subject["digest"]["sha256"] = hashlib.sha256(table.read_bytes()).hexdigest()
    for subject in statement["subject"]:
        if subject["name"] == "manifest.json":
            subject["digest"]["sha256"] = hashlib.sha256(
                (run / "manifest.json").read_bytes()
            ).hexdigest()
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text(json.dumps(envelope))
    code, out = _verify(run, keys["openssl"].public, capsys=capsys)
    assert code == 1
    assert "no signature verifies under a trusted key" in out


def test_an_extra_file_fails(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    (run / "tables" / "extra.csv").write_text("a,b\n")
    _rehash(run, "tables/extra.csv")  # the manifest lists it: plain verify passes
    assert _verify(run, capsys=capsys)[0] == 0
    code, out = _verify(run, keys["openssl"].public, capsys=capsys)
    assert code == 1
    assert "tables/extra.csv" in out and "not a subject of the signed attestation" in out


def test_a_missing_subject_fails(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    (run / "tables" / "parity.md").unlink()
    _rehash(run, "tables/parity.md")  # removed from the manifest too: plain verify passes
    assert _verify(run, capsys=capsys)[0] == 0
    code, out = _verify(run, keys["openssl"].public, capsys=capsys)
    assert code == 1
    assert "tables/parity.md" in out and "a signed subject is missing" in out


def test_unsigned_folder(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _verify(run, capsys=capsys)
    assert code == 0
    assert "signature: unsigned" in out
    code, out = _verify(run, keys["openssl"].public, capsys=capsys)
    assert code == 1
    assert "missing: the folder is not signed" in out


def test_trusted_keys_file_holds_both_formats(
    keys: dict[str, KeyPair], run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trusted = tmp_path / "trusted"
    trusted.write_text(
        "# the lab's keys\n"
        + keys["ssh-keygen"].public.read_text()
        + "\n"
        + keys["openssl"].public.read_text()
    )
    for maker in ("ssh-keygen", "openssl"):
        assert _sign(run, keys[maker].private) == 0
        capsys.readouterr()
        assert main(["verify", str(run), "--trusted-keys", str(trusted)]) == 0
        assert _fingerprint(keys[maker].public) in capsys.readouterr().out
    assert _sign(run, keys["cryptography-pem"].private) == 0
    assert main(["verify", str(run), "--trusted-keys", str(trusted)]) == 1


def test_reproduce_sign_key_signs_in_staging(
    keys: dict[str, KeyPair],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import audiorepro.runner.study as study_module

    real_publish = study_module.publish
    seen: list[bool] = []

    def publish(staging: Path, out: Path) -> None:
        seen.append((staging / ATTESTATION).is_file())  # signed before it becomes OUT
        real_publish(staging, out)

    monkeypatch.setattr(study_module, "publish", publish)
    out = tmp_path / "out"
    pair = keys["ssh-keygen"]
    argv = ["reproduce", str(_study(tmp_path)), "--out", str(out)]
    assert main([*argv, "--sign-key", str(pair.private)]) == 0
    assert seen == [True]
    assert f"signed {out / ATTESTATION} with key {_fingerprint(pair.public)}" in (
        capsys.readouterr().out
    )
    code, text = _verify(out, pair.public, capsys=capsys)
    assert code == 0, text
    # A rerun unsigned replaces the folder whole: the old attestation is not foreign, and gone.
    assert main(argv) == 0
    assert not (out / ATTESTATION).exists()


def test_reproduce_with_a_bad_sign_key_starts_nothing(
    keys: dict[str, KeyPair], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    capsys.readouterr()
    argv = ["reproduce", str(_study(tmp_path)), "--out", str(out)]
    assert main([*argv, "--sign-key", str(keys["openssl"].public)]) == 2
    _one_line(capsys.readouterr().err, "openssl", "is a public key")
    assert not out.exists()


def _big(path: Path) -> Path:
    with open(path, "wb") as f:
        f.truncate(100 << 20)  # 100 MB, sparse
    return path


@pytest.fixture(scope="module")
def hostile_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    rsa = _openssl_pair(folder, "RSA")
    not_a_key = folder / "notes.txt"
    not_a_key.write_text("these are my notes\n")
    bad_pem = folder / "bad.pem"
    bad_pem.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    encrypted = folder / "encrypted.pem"
    subprocess.run(
        [_tool("openssl"), "genpkey", "-algorithm", "ed25519", "-aes256", "-pass", "pass:pw",
         "-out", encrypted],
        check=True,
    )  # fmt: skip
    return {
        "not-a-key": not_a_key,
        "bad-pem": bad_pem,
        "rsa-private": rsa.private,
        "rsa-public": rsa.public,
        "ssh-rsa-public": _ssh_pair(folder, "rsa").public,
        "encrypted-pem": encrypted,
        "encrypted-openssh": _ssh_pair(folder, "ed25519", passphrase="pw").private,
        "100MB": _big(folder / "big.key"),
        "folder": folder,
    }


SIGN_REFUSED = {
    "not-a-key": "is not a key file",
    "bad-pem": "cannot be read as a key",
    "rsa-private": "is an RSA key",
    "rsa-public": "is a public key",
    "encrypted-pem": "is an encrypted private key",
    "encrypted-openssh": "is an encrypted private key",
    "100MB": "bytes; expected an Ed25519 private key",
    "folder": "is a folder",
}
VERIFY_REFUSED = {
    "not-a-key": "line 1 is not a public key",
    "bad-pem": "line 1 is a private key",
    "rsa-private": "line 1 is a private key",
    "rsa-public": "is an RSA key",
    "ssh-rsa-public": "is an RSA key",
    "100MB": "bytes; expected a public key file",
    "folder": "is a folder",
}


@pytest.mark.parametrize("case", sorted(SIGN_REFUSED))
def test_hostile_signing_keys_are_one_line(
    case: str, hostile_keys: dict[str, Path], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert _sign(run, hostile_keys[case]) == 2
    _one_line(capsys.readouterr().err, str(hostile_keys[case]), SIGN_REFUSED[case])
    assert not (run / ATTESTATION).exists()


@pytest.mark.parametrize("case", sorted(VERIFY_REFUSED))
def test_hostile_trusted_keys_are_one_line(
    case: str,
    hostile_keys: dict[str, Path],
    keys: dict[str, KeyPair],
    run: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    capsys.readouterr()
    assert main(["verify", str(run), "--key", str(hostile_keys[case])]) == 2
    err = capsys.readouterr().err
    _one_line(err, str(hostile_keys[case]), VERIFY_REFUSED[case])
    assert "PRIVATE KEY-----\n" not in err  # never echoes a private key


def _envelope_edit(change: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        envelope = json.loads(path.read_text())
        change(envelope)
        path.write_text(json.dumps(envelope))

    return edit


def _symlink(path: Path) -> None:
    real = path.with_name("real.json")
    path.rename(real)
    os.symlink(real, path)


BROKEN_ATTESTATIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "symlink": (_symlink, "is a symbolic link"),
    "not-json": (lambda p: p.write_text("{not json"), "is not valid JSON"),
    "a-list": (lambda p: p.write_text("[]"), "is not a DSSE envelope"),
    "huge-integer": (lambda p: p.write_text('{"a": ' + "9" * 5000 + "}"), "is not valid JSON"),
    "payload-type": (
        _envelope_edit(lambda e: e.update(payloadType="text/plain")),
        "key 'payloadType'",
    ),
    "bad-base64": (_envelope_edit(lambda e: e.update(payload="@@@")), "is not valid base64"),
    "no-signatures": (
        _envelope_edit(lambda e: e.update(signatures=[])),
        "is not a list of 1 to 16 signatures",
    ),
    "short-signature": (
        _envelope_edit(lambda e: e.update(signatures=[{"keyid": "k", "sig": "AAAA"}])),
        "is not an Ed25519 signature",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_ATTESTATIONS))
@pytest.mark.parametrize("with_key", [False, True])
def test_a_broken_attestation_is_one_line(
    case: str,
    with_key: bool,
    keys: dict[str, KeyPair],
    run: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _sign(run, keys["openssl"].private) == 0
    change, message = BROKEN_ATTESTATIONS[case]
    change(run / ATTESTATION)
    capsys.readouterr()
    argv = ["verify", str(run), *(["--key", str(keys["openssl"].public)] if with_key else [])]
    assert main(argv) == 2
    _one_line(capsys.readouterr().err, ATTESTATION, message)


def test_a_signed_statement_of_the_wrong_shape_is_one_line(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Signed by the trusted key, but not a statement audiorepro writes: exit 2, not a pass."""
    from audiorepro.runner.output.attest import envelope_of
    from audiorepro.runner.output.keys import load_signing_key

    key = load_signing_key(keys["openssl"].private)
    statement = {"_type": "https://in-toto.io/Statement/v1", "subject": "everything"}
    envelope = envelope_of(statement, key)  # type: ignore[arg-type]
    (run / ATTESTATION).write_text(json.dumps(envelope))
    capsys.readouterr()
    assert main(["verify", str(run), "--key", str(keys["openssl"].public)]) == 2
    _one_line(capsys.readouterr().err, "predicateType")


def test_sign_refuses_a_folder_that_differs_from_its_manifest(
    keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "tables" / "parity.csv").write_text("changed\n")
    capsys.readouterr()
    assert _sign(run, keys["openssl"].private) == 2
    _one_line(capsys.readouterr().err, "does not match its manifest.json", "tables/parity.csv")
    assert not (run / ATTESTATION).exists()


@pytest.mark.parametrize("rel", ["manifest.json", "tables/parity.csv"])
def test_sign_refuses_a_symlink_in_the_run(
    rel: str, keys: dict[str, KeyPair], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link would make the signature cover whatever it points to, wherever that is."""
    real = run.parent / "elsewhere"
    (run / rel).rename(real)
    os.symlink(real, run / rel)
    capsys.readouterr()
    assert _sign(run, keys["openssl"].private) == 2
    _one_line(capsys.readouterr().err, f"holds a symbolic link {rel}")
    assert not (run / ATTESTATION).exists()


def test_key_options_need_an_output_folder(
    keys: dict[str, KeyPair], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path)
    capsys.readouterr()
    assert main(["verify", str(study), "--key", str(keys["openssl"].public)]) == 2
    _one_line(capsys.readouterr().err, "--key and --trusted-keys check a reproduce output folder")


def test_the_readme_signing_commands_as_written(tmp_path: Path) -> None:
    """The "Signed output folders" block of docs/studies.md, run line by line in bash
    (STUDY.toml the small study here, `audiorepro` this Python's module)."""
    text = (ROOT / "docs" / "studies.md").read_text()
    section = text.split("### Signed output folders", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert any("--sign-key" in line for line in lines)
    study = _study(tmp_path)
    study.rename(tmp_path / "STUDY.toml")
    script = f'set -e\naudiorepro() {{ "{sys.executable}" -m audiorepro "$@"; }}\n'
    script += "\n".join(lines) + "\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    verified = [x for x in done.stdout.splitlines() if x.startswith("signature: verified;")]
    assert len(verified) == 2, done.stdout
    assert _fingerprint(tmp_path / "signing.pub.pem") in verified[0]  # reproduce --sign-key
    assert _fingerprint(tmp_path / "signing_ssh.pub") in verified[1]  # sign, re-signed


def test_a_nested_study_is_signed_with_the_run(
    keys: dict[str, KeyPair], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's shape (a probe study in OUT/probe): its files and its manifest are subjects,
    and a consistent rewrite inside it (both manifests re-hashed) fails only with --key."""
    from audiorepro.runner.demo import prepare_probe_demo
    from audiorepro.runner.output.keys import load_signing_key
    from audiorepro.runner.study import run_studies
    from audiorepro.specs.study import load_study

    out = tmp_path / "out"
    top = load_study(_study(tmp_path))
    probe = load_study(prepare_probe_demo(tmp_path / "probe-work"))
    key = load_signing_key(keys["ssh-keygen"].private)
    run_studies([(top, "."), (probe, "probe")], out, progress=False, sign_key=key)
    envelope = json.loads((out / ATTESTATION).read_text())
    names = [s["name"] for s in json.loads(base64.b64decode(envelope["payload"]))["subject"]]
    assert names == sorted(_run_files(out)) and "probe/manifest.json" in names
    assert _verify(out, keys["ssh-keygen"].public, capsys=capsys)[0] == 0
    (out / "probe" / "report.html").write_text("<p>all good</p>")
    nested = json.loads((out / "probe" / "manifest.json").read_text())
    nested["outputs"]["report.html"] = hashlib.sha256(b"<p>all good</p>").hexdigest()
    (out / "probe" / "manifest.json").write_text(json.dumps(nested))
    _rehash(out, "probe/report.html")
    _rehash(out, "probe/manifest.json")
    assert _verify(out, capsys=capsys)[0] == 0
    code, text = _verify(out, keys["ssh-keygen"].public, capsys=capsys)
    assert code == 1
    assert "probe/report.html" in text and "probe/manifest.json" in text
