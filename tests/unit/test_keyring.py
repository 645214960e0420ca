"""The secrets keyring: a sealed value opens only with its key and where it belongs."""

from __future__ import annotations

import base64
import os
from dataclasses import replace
from pathlib import Path

import pytest

from herder.keyring import (
    Keyring,
    KeyringError,
    associated_data,
    channel_associated_data,
    home_keyring,
    load_keyring,
    new_key,
)

KEY, OLD_KEY = os.urandom(32), os.urandom(32)
HERE = associated_data("ten_a", "API_TOKEN", 1)


def test_a_sealed_value_opens_where_it_was_sealed() -> None:
    keyring = Keyring.of([KEY])
    sealed = keyring.seal(b"hunter2", HERE)
    assert b"hunter2" not in sealed.ciphertext
    assert keyring.open(sealed, HERE) == b"hunter2"
    assert sealed.key_id == keyring.current_key_id


def test_two_seals_of_one_value_differ() -> None:
    keyring = Keyring.of([KEY])
    assert keyring.seal(b"same", HERE).ciphertext != keyring.seal(b"same", HERE).ciphertext


@pytest.mark.parametrize(
    "elsewhere",
    [
        associated_data("ten_b", "API_TOKEN", 1),  # another tenant's row
        associated_data("ten_a", "OTHER", 1),  # another secret's name
        associated_data("ten_a", "API_TOKEN", 2),  # another version
        channel_associated_data("ten_a", "API_TOKEN"),  # an alert channel's domain
    ],
)
def test_a_value_moved_elsewhere_does_not_open(elsewhere: bytes) -> None:
    keyring = Keyring.of([KEY])
    with pytest.raises(KeyringError, match="does not open"):
        keyring.open(keyring.seal(b"hunter2", HERE), elsewhere)


@pytest.mark.parametrize(
    "elsewhere",
    [
        channel_associated_data("ten_a", "ach_2"),  # another channel
        channel_associated_data("ten_b", "ach_1"),  # another tenant's channel of that id
        associated_data("ten_a", "ach_1", 1),  # a tenant's secret
    ],
)
def test_a_channel_secret_opens_for_its_channel_only(elsewhere: bytes) -> None:
    keyring = Keyring.of([KEY])
    sealed = keyring.seal(b"whsec_x", channel_associated_data("ten_a", "ach_1"))
    assert keyring.open(sealed, channel_associated_data("ten_a", "ach_1")) == b"whsec_x"
    with pytest.raises(KeyringError, match="does not open"):
        keyring.open(sealed, elsewhere)


def test_a_tampered_ciphertext_or_nonce_does_not_open() -> None:
    keyring = Keyring.of([KEY])
    sealed = keyring.seal(b"hunter2", HERE)
    flipped = bytes([sealed.ciphertext[0] ^ 1]) + sealed.ciphertext[1:]
    for tampered in (replace(sealed, ciphertext=flipped), replace(sealed, nonce=bytes(12))):
        with pytest.raises(KeyringError, match="does not open"):
            keyring.open(tampered, HERE)


def test_a_rotated_keyring_opens_old_seals_and_seals_with_the_new_key() -> None:
    old = Keyring.of([OLD_KEY])
    sealed = old.seal(b"hunter2", HERE)
    rotated = Keyring.of([KEY, OLD_KEY])
    assert rotated.open(sealed, HERE) == b"hunter2"
    assert rotated.seal(b"x", HERE).key_id == Keyring.of([KEY]).current_key_id != old.current_key_id


def test_a_key_not_in_the_keyring_is_named_never_shown() -> None:
    sealed = Keyring.of([OLD_KEY]).seal(b"hunter2", HERE)
    with pytest.raises(KeyringError, match=sealed.key_id) as refused:
        Keyring.of([KEY]).open(sealed, HERE)
    assert base64.b64encode(KEY).decode() not in str(refused.value)
    assert "hunter2" not in str(refused.value)
    assert KEY.hex() not in repr(Keyring.of([KEY]))


def test_keys_come_from_the_environment_current_first() -> None:
    current, old = new_key(), new_key()
    keyring = load_keyring({"HERDER_SECRETS_KEY": f"{current},{old}"})
    assert keyring is not None
    assert keyring.current_key_id == Keyring.of([base64.b64decode(current)]).current_key_id
    assert len(keyring.key_ids) == 2
    assert load_keyring({}) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not base64!", "not base64"),
        (base64.b64encode(b"short").decode(), "5 bytes, not 32"),
        (" , ", "holds no key"),
    ],
)
def test_a_bad_key_is_refused_saying_why(value: str, message: str) -> None:
    with pytest.raises(KeyringError, match=message):
        load_keyring({"HERDER_SECRETS_KEY": value})


def test_a_home_key_file_is_made_private_once_and_kept(tmp_path: Path) -> None:
    first = home_keyring(tmp_path)
    key_file = tmp_path / "secrets.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert home_keyring(tmp_path).current_key_id == first.current_key_id


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(new_key() + "\n")
    key_file.chmod(0o644)
    with pytest.raises(KeyringError, match="make it 0600"):
        load_keyring({"HERDER_SECRETS_KEY_FILE": str(key_file)})
    key_file.chmod(0o600)
    assert load_keyring({"HERDER_SECRETS_KEY_FILE": str(key_file)}) is not None
