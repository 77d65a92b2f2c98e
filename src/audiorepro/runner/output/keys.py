"""Ed25519 keys for signed output folders (:mod:`.attest`), as the usual tools write them.

Private keys (``audiorepro sign --key``, ``reproduce --sign-key``): PEM PKCS#8 as
``openssl genpkey -algorithm ed25519`` writes it, and the OpenSSH private key format of
``ssh-keygen -t ed25519``. Public keys (``verify OUT --key`` and ``--trusted-keys``): the SPKI
PEM of ``openssl pkey -pubout``, and the ``ssh-ed25519 AAAA... comment`` line of a ``.pub``
file. Parsing is the ``cryptography`` library's; this module only decides which loader a file
needs and turns every refusal into one line (exit 2).

An encrypted private key is refused, saying how to decrypt a copy: OpenSSH's encryption needs
the ``bcrypt`` package, which audiorepro does not depend on, and a passphrase read from the
environment would sit in shell histories and job scripts.

A key's id (``keyid``) is the OpenSSH fingerprint of its public key, ``SHA256:`` and the
unpadded base64 of the SHA-256 of the key's SSH wire encoding: what ``ssh-keygen -lf KEY.pub``
prints, for either format.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_text

#: A key file is a few hundred bytes; a trusted-keys file of many keys stays far below this.
KEY_MAX_BYTES = 1 << 20

_OPENSSH_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
_OPENSSH_MAGIC = b"openssh-key-v1\0"
_PEM_PUBLIC = ("-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----")
_DECRYPT_HINT = (
    "decrypt a copy first (`ssh-keygen -p -N '' -f COPY` or "
    "`openssl pkey -in KEY -out COPY`) and keep it private"
)


@dataclass(frozen=True)
class SigningKey:
    """A private Ed25519 key read from ``source``, and its public key's id."""

    private: Ed25519PrivateKey
    keyid: str
    source: str


@dataclass(frozen=True)
class TrustedKey:
    """A public Ed25519 key the user trusts, its id, and where it was read."""

    public: Ed25519PublicKey
    keyid: str
    source: str


def keyid_of(public: Ed25519PublicKey) -> str:
    """The OpenSSH fingerprint of ``public`` (what ``ssh-keygen -lf`` prints).

    >>> key = Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key()
    >>> keyid_of(key)
    'SHA256:tAXFyTXI8xtDaujAEcwJslAYc9/6FKcUkd2Lw0xDhPo'
    """
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    digest = hashlib.sha256(base64.b64decode(line.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _kind(key: object) -> str:
    """``RSA`` for an RSAPrivateKey, ``EllipticCurve`` for an EllipticCurvePublicKey, ..."""
    name = type(key).__name__
    for suffix in ("PrivateKey", "PublicKey"):
        name = name.removesuffix(suffix)
    return name


def _text(path: Path, what: str) -> str:
    return read_text(path, what=what, max_bytes=KEY_MAX_BYTES)


def _whole(exc: Exception) -> str:
    """An exception's message whole, on one line (it was cut at its first '.', which cut
    ``b'chacha20-poly1305@openssh.com'`` to ``b'chacha20-poly1305@openssh``)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _openssh_cipher(text: str) -> str | None:
    """The cipher an OpenSSH private key file names (``none`` when not encrypted), read from
    its header (``openssh-key-v1``, then the cipher's name); None when that cannot be read.

    >>> body = base64.b64encode(_OPENSSH_MAGIC + struct.pack(">I", 4) + b"none").decode()
    >>> _openssh_cipher(f"{_OPENSSH_BEGIN}\\n{body}\\n-----END OPENSSH PRIVATE KEY-----")
    'none'
    """
    lines = text.strip().splitlines()
    try:
        blob = base64.b64decode("".join(ln.strip() for ln in lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not blob.startswith(_OPENSSH_MAGIC) or len(blob) < len(_OPENSSH_MAGIC) + 4:
        return None
    at = len(_OPENSSH_MAGIC)
    (length,) = struct.unpack(">I", blob[at : at + 4])
    name = blob[at + 4 : at + 4 + length]
    if len(name) != length or not name.isascii():
        return None
    return name.decode("ascii")


def load_signing_key(path: Path) -> SigningKey:
    """The private Ed25519 key in ``path`` (PEM PKCS#8 or OpenSSH), or one line naming it."""
    what = "an Ed25519 private key (openssl genpkey -algorithm ed25519, or ssh-keygen -t ed25519)"
    text = _text(path, what)
    head = text.lstrip()
    if head.startswith(("ssh-", _PEM_PUBLIC[0])):
        raise UserError(f"is a public key; expected {what}", source=path)
    cipher = _openssh_cipher(head) if head.startswith(_OPENSSH_BEGIN) else None
    if cipher not in (None, "none"):  # cryptography names only some ciphers "encrypted"
        raise UserError(
            f"is an encrypted private key (OpenSSH, cipher {cipher}); {_DECRYPT_HINT}",
            source=path,
        )
    try:
        if head.startswith(_OPENSSH_BEGIN):
            key: object = serialization.load_ssh_private_key(text.encode(), None)
        elif head.startswith("-----BEGIN ") and "PRIVATE KEY-----" in head.split("\n", 1)[0]:
            key = serialization.load_pem_private_key(text.encode(), None)
        else:
            raise UserError(f"is not a key file; expected {what}", source=path)
    except TypeError:  # cryptography's signal for "encrypted, and no password given"
        raise UserError(f"is an encrypted private key; {_DECRYPT_HINT}", source=path) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise UserError(
            f"cannot be read as a key ({_whole(exc)}); expected {what}", source=path
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"is an {_kind(key)} key; expected {what}", source=path)
    return SigningKey(key, keyid_of(key.public_key()), str(path))


def _public(data: bytes, source: str, where: str) -> TrustedKey:
    """One public key from its PEM block or SSH line (``where``: the line, for messages)."""
    expected = "an Ed25519 public key ('ssh-ed25519 AAAA...' or a PEM PUBLIC KEY block)"
    try:
        if data.startswith(b"-----"):
            key: object = serialization.load_pem_public_key(data)
        else:
            key = serialization.load_ssh_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise UserError(f"{where}cannot be read as a key ({_whole(exc)}); expected {expected}",
                        source=source) from None  # fmt: skip
    if not isinstance(key, Ed25519PublicKey):
        raise UserError(f"{where}is an {_kind(key)} key; expected {expected}", source=source)
    return TrustedKey(key, keyid_of(key), source)


def parse_public_keys(text: str, source: str) -> list[TrustedKey]:
    """Every public key in ``text``: SSH lines and PEM blocks, blank lines and ``#`` comments
    between them. A private key, or a line that is neither, is one line naming it."""
    keys: list[TrustedKey] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line, where = lines[i].strip(), f"line {i + 1} "
        i += 1
        if not line or line.startswith("#"):
            continue
        if "PRIVATE KEY-----" in line:
            raise UserError(
                f"{where}is a private key; expected a public key (`openssl pkey -in KEY -pubout`"
                " or the .pub file of ssh-keygen): never hand out the private key",
                source=source,
            )
        if line == _PEM_PUBLIC[0]:
            block = [line]
            while i < len(lines) and lines[i].strip() != _PEM_PUBLIC[1]:
                block.append(lines[i].strip())
                i += 1
            block.append(_PEM_PUBLIC[1])
            i += 1
            keys.append(_public("\n".join(block).encode() + b"\n", source, where))
        elif line.startswith("ssh-") or line.startswith("ecdsa-"):
            keys.append(_public(line.encode(), source, where))
        else:
            raise UserError(
                f"{where}is not a public key; expected 'ssh-ed25519 AAAA...' or a PEM PUBLIC "
                "KEY block",
                source=source,
            )
    return keys


def load_trusted_keys(keys: tuple[Path, ...], trusted_keys: Path | None) -> list[TrustedKey]:
    """The keys of ``verify OUT --key K`` (each file one key, or several) and of
    ``--trusted-keys FILE`` (one key per line, PEM blocks too); a file with none is refused."""
    files = [*keys, *([trusted_keys] if trusted_keys is not None else [])]
    found: list[TrustedKey] = []
    for path in files:
        loaded = parse_public_keys(_text(path, "a public key file"), str(path))
        if not loaded:
            raise UserError("holds no public key; expected 'ssh-ed25519 AAAA...'", source=path)
        found += loaded
    return found
