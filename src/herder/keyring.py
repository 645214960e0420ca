"""The server's secrets keys: AES-256-GCM, each ciphertext sealed under one key and bound to
where it belongs.

A keyring holds the current key (every new seal) and older ones (still opened), each known by
a key id derived from the key itself, stored beside the ciphertext: rotating the server key is
putting a new key first and keeping the old ones until every secret was sealed again
(``herder secret reencrypt``). The associated data — tenant, secret name, version — is
authenticated but not stored in the ciphertext: a ciphertext copied to another tenant's row,
another name or another version does not open. Alert channels' signing secrets are sealed
the same way, bound to their tenant and channel (``channel_associated_data``).

Where the keys come from: ``HERDER_SECRETS_KEY`` (base64 of 32 bytes; several, comma
separated, the first current) or the file ``HERDER_SECRETS_KEY_FILE`` names (one base64 key a
line, the first current). ``herder up`` and a SQLite ``herder server`` make a key file (0600)
in their home on the first start when neither is set.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from herder.domain.errors import HerderError

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's standard nonce; random per seal
KEY_ENV = "HERDER_SECRETS_KEY"
KEY_FILE_ENV = "HERDER_SECRETS_KEY_FILE"
HOME_KEY_FILE = "secrets.key"


class KeyringError(HerderError):
    """A key that cannot be read, or a ciphertext that does not open; the message says which
    (never with a key or a value in it)."""


@dataclass(frozen=True)
class Sealed:
    """A value as stored: which key sealed it, the nonce, the ciphertext with its GCM tag."""

    key_id: str
    nonce: bytes
    ciphertext: bytes


def key_id_of(key: bytes) -> str:
    """A short name for a key that tells nothing about it (a hash of it, domain-separated)."""
    return hashlib.sha256(b"herder secrets key id\0" + key).hexdigest()[:16]


def associated_data(tenant_id: str, name: str, version: int) -> bytes:
    """What a ciphertext is bound to; NUL-separated (neither ids nor names hold a NUL)."""
    return f"herder-secret\0{tenant_id}\0{name}\0{version}".encode()


def channel_associated_data(tenant_id: str, channel_id: str) -> bytes:
    """What an alert channel's signing secret is bound to: its own domain, so neither a
    tenant's secret nor another channel's ciphertext opens in its place."""
    return f"herder-alert-channel\0{tenant_id}\0{channel_id}".encode()


def hook_associated_data(tenant_id: str, hook_id: str) -> bytes:
    """What an inbound webhook's signing secret is bound to: its tenant and hook."""
    return f"herder-hook\0{tenant_id}\0{hook_id}".encode()


@dataclass(frozen=True)
class Keyring:
    current_key_id: str
    _keys: dict[str, bytes] = field(repr=False)

    @classmethod
    def of(cls, keys: list[bytes]) -> Keyring:
        """The first key is the current one; the others are only opened."""
        if not keys:
            raise KeyringError("a keyring needs at least one key")
        for key in keys:
            if len(key) != KEY_BYTES:
                raise KeyringError(f"a secrets key must be {KEY_BYTES} bytes, not {len(key)}")
        return cls(key_id_of(keys[0]), {key_id_of(key): key for key in keys})

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def seal(self, plaintext: bytes, associated: bytes) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = AESGCM(self._keys[self.current_key_id]).encrypt(nonce, plaintext, associated)
        return Sealed(self.current_key_id, nonce, ciphertext)

    def open(self, sealed: Sealed, associated: bytes) -> bytes:
        key = self._keys.get(sealed.key_id)
        if key is None:
            raise KeyringError(
                f"sealed with key {sealed.key_id}, which this server's keyring does not hold "
                f"(it holds {', '.join(sorted(self._keys))})"
            )
        try:
            return AESGCM(key).decrypt(sealed.nonce, sealed.ciphertext, associated)
        except InvalidTag as error:
            raise KeyringError(
                "the ciphertext does not open: altered, or moved from another secret"
            ) from error


def new_key() -> str:
    """A fresh key, base64 (what the key file and ``HERDER_SECRETS_KEY`` hold)."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def parse_keys(text: str, where: str) -> list[bytes]:
    """Base64 keys separated by commas or new lines; blank entries and ``#`` lines skipped."""
    keys = []
    for number, line in enumerate(text.replace(",", "\n").splitlines(), start=1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        try:
            key = base64.b64decode(entry, validate=True)
        except binascii.Error as error:
            raise KeyringError(f"{where}: entry {number} is not base64") from error
        if len(key) != KEY_BYTES:
            raise KeyringError(f"{where}: entry {number} is {len(key)} bytes, not {KEY_BYTES}")
        keys.append(key)
    if not keys:
        raise KeyringError(f"{where} holds no key")
    return keys


def load_keyring(environment: dict[str, str] | None = None) -> Keyring | None:
    """The keyring the environment configures, or ``None`` when it configures none."""
    environment = dict(os.environ) if environment is None else environment
    keys: list[bytes] = []
    if environment.get(KEY_ENV):
        keys += parse_keys(environment[KEY_ENV], KEY_ENV)
    if environment.get(KEY_FILE_ENV):
        keys += read_key_file(Path(environment[KEY_FILE_ENV]))
    return Keyring.of(keys) if keys else None


def read_key_file(path: Path) -> list[bytes]:
    try:
        mode = path.stat().st_mode & 0o777
        text = path.read_text()
    except OSError as error:
        raise KeyringError(f"cannot read the secrets key file {path}: {error.strerror}") from error
    if mode & 0o077:
        raise KeyringError(f"the secrets key file {path} is mode {mode:04o}; make it 0600")
    return parse_keys(text, str(path))


def home_keyring(home: Path) -> Keyring:
    """The keyring of a home directory's key file, made (0600) on the first start."""
    path = home / HOME_KEY_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return Keyring.of(read_key_file(path))
    with os.fdopen(descriptor, "w") as file:
        file.write(new_key() + "\n")
    return Keyring.of(read_key_file(path))
