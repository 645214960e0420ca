"""An API key's token names its tenant (``ten_….key_….secret``), and a token made before cells
(``key_….secret``) still parses; a hook's address names its tenant the same way."""

from __future__ import annotations

import pytest

from herder.domain.hooks import hook_address, parse_hook_address
from herder.domain.keys import ApiToken, is_api_key, parse_api_token


@pytest.mark.parametrize(
    ("token", "parsed"),
    [
        ("ten_A.key_B.s3cr3t-_x", ApiToken("ten_A", "key_B", "s3cr3t-_x")),
        ("key_B.s3cr3t", ApiToken(None, "key_B", "s3cr3t")),
        ("nonsense", None),
        ("", None),
        ("key_B.", None),
        (".s3cr3t", None),
        ("ten_A..s3cr3t", None),
        ("ten_A.key_B.s.extra", None),
        ("a.b.c.d", None),
    ],
)
def test_a_token_parses_into_its_parts_or_not_at_all(token: str, parsed: ApiToken | None) -> None:
    assert parse_api_token(token) == parsed


@pytest.mark.parametrize("token", ["ten_A.key_B.s3cr3t", "key_B.s3cr3t"])
def test_a_token_is_written_as_it_parses(token: str) -> None:
    parsed = parse_api_token(token)
    assert parsed is not None
    assert str(parsed) == token


@pytest.mark.parametrize(
    ("token", "api_key"),
    [("ten_A.key_B.s", True), ("key_B.s", True), ("wtk_A.s", False), ("wks_A", False)],
)
def test_worker_credentials_are_not_taken_for_api_keys(token: str, api_key: bool) -> None:
    assert is_api_key(token) is api_key


def test_a_hook_address_names_its_tenant_and_an_old_one_its_id_alone() -> None:
    assert parse_hook_address(hook_address("ten_A", "hook_B")) == ("ten_A", "hook_B")
    assert parse_hook_address("hook_B") == (None, "hook_B")
