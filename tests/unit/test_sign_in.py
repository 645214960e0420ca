"""Single sign-on's pure rules (``domain/sign_in.py``) and its configuration, as tables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from herder.domain.errors import Forbidden, Invalid, Unauthorized
from herder.domain.models import Role
from herder.domain.sign_in import (
    Assignment,
    assign,
    check_id_token,
    csrf_token,
    parse_group_grants,
    parse_session_token,
    return_path,
)
from herder.settings import oidc_from

GRANTS = parse_group_grants(
    "sre=acme:admin, staff=acme:viewer,oncall=acme:operator,globex-dev=globex:developer"
)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (["staff"], Assignment("acme", Role.VIEWER)),
        (["staff", "sre"], Assignment("acme", Role.ADMIN)),  # the highest role wins
        (["oncall", "staff", "unrelated"], Assignment("acme", Role.OPERATOR)),
        (["globex-dev"], Assignment("globex", Role.DEVELOPER)),
    ],
)
def test_groups_map_a_person_to_a_tenant_and_role(groups: list[str], expected: Assignment) -> None:
    claims = {"sub": "1", "groups": groups}
    assert (
        assign(claims, tenant_claim=None, role_claim=None, groups_claim="groups", grants=GRANTS)
        == expected
    )


@pytest.mark.parametrize(
    ("claims", "refusal"),
    [
        ({"groups": []}, "none of your groups"),
        ({}, "none of your groups"),
        ({"groups": "sre"}, "none of your groups"),  # not a list
        ({"groups": [{"name": "sre"}]}, "none of your groups"),
        ({"groups": ["sre", "globex-dev"]}, "several tenants"),
    ],
)
def test_a_person_no_group_maps_or_many_tenants_map_is_refused(
    claims: dict[str, object], refusal: str
) -> None:
    with pytest.raises(Forbidden, match=refusal):
        assign(claims, tenant_claim=None, role_claim=None, groups_claim="groups", grants=GRANTS)


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"t": "acme", "r": "operator"}, Assignment("acme", Role.OPERATOR)),
        ({"t": "acme"}, Assignment("acme", Role.VIEWER)),
        ({"t": "acme", "r": "owner"}, None),
        ({"t": ""}, None),
        ({"t": ["acme"]}, None),
        ({}, None),
    ],
)
def test_claims_map_a_person_when_configured(
    claims: dict[str, object], expected: Assignment | None
) -> None:
    def mapped() -> Assignment:
        return assign(claims, tenant_claim="t", role_claim="r", groups_claim="groups", grants=())

    if expected is None:
        with pytest.raises(Forbidden):
            mapped()
    else:
        assert mapped() == expected


@pytest.mark.parametrize("text", ["sre", "sre=acme", "sre=acme:owner", "=acme:admin", "sre=:admin"])
def test_a_malformed_group_mapping_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="HERDER_OIDC_GROUPS"):
        parse_group_grants(text)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "/"),
        ("", "/"),
        ("/", "/"),
        ("/runs", "/runs"),
        ("/#/runs/run_1?x=1", "/#/runs/run_1?x=1"),
    ],
)
def test_a_sign_in_returns_to_a_path_of_the_dashboard(given: str | None, expected: str) -> None:
    assert return_path(given) == expected


@pytest.mark.parametrize(
    "given",
    [
        "https://evil.example",
        "//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "evil.example",
        "javascript:alert(1)",
        "/ok\r\nSet-Cookie: x=1",
        "/\tx",
        "http:/evil.example",
        "/" + "a" * 3000,
    ],
)
def test_open_redirects_are_refused(given: str) -> None:
    with pytest.raises(Invalid) as refused:
        return_path(given)
    assert refused.value.field == "next"


NOW = 1_800_000_000.0
GOOD = {
    "iss": "https://idp.example",
    "aud": "herder",
    "exp": NOW + 300,
    "iat": NOW - 5,
    "nonce": "n",
    "sub": "alice",
}


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({}, None),
        ({"aud": ["herder", "other"], "azp": "herder"}, None),
        ({"exp": NOW - 30}, None),  # within the clock's skew
        ({"iss": "https://evil.example"}, "another issuer"),
        ({"aud": "other"}, "another application"),
        ({"aud": ["other", "herder"]}, "another application"),  # no azp
        ({"aud": ["herder", "other"], "azp": "other"}, "another application"),
        ({"exp": NOW - 61}, "expired"),
        ({"exp": "soon"}, "expired"),
        ({"iat": NOW + 3600}, "future"),
        ({"nonce": "m"}, "nonce"),
        ({"nonce": None}, "nonce"),
        ({"sub": ""}, "no sub"),
    ],
)
def test_id_token_claims(changes: dict[str, object], refusal: str | None) -> None:
    claims = {**GOOD, **changes}

    def checked() -> None:
        check_id_token(
            claims, issuer="https://idp.example", client_id="herder", nonce="n", now_seconds=NOW
        )

    if refusal is None:
        checked()
    else:
        with pytest.raises(Unauthorized, match=refusal):
            checked()


@pytest.mark.parametrize(
    ("token", "parsed"),
    [
        ("hse_ses_01ABC.secret", ("ses_01ABC", "secret")),
        ("hse_ses_01ABC.", None),
        ("hse_key_01.secret", None),
        ("ten_1.key_1.secret", None),
        ("hse_ses_" + "A" * 40 + ".s", None),
    ],
)
def test_session_tokens(token: str, parsed: tuple[str, str] | None) -> None:
    found = parse_session_token(token)
    assert (found and (found.session_id, found.secret)) == parsed
    if found is not None:
        assert str(found) == token


def test_the_csrf_token_is_the_sessions_own() -> None:
    assert csrf_token("hse_ses_1.a") == csrf_token("hse_ses_1.a")
    assert csrf_token("hse_ses_1.a") != csrf_token("hse_ses_1.b")


BASE = {
    "HERDER_OIDC_ISSUER": "https://idp.example",
    "HERDER_OIDC_CLIENT_ID": "herder",
    "HERDER_OIDC_CLIENT_SECRET": "s",
    "HERDER_OIDC_GROUPS": "sre=acme:admin",
}


def test_sign_in_is_off_unless_an_issuer_is_set() -> None:
    assert oidc_from({}) is None
    configured = oidc_from(BASE)
    assert configured is not None
    assert configured.group_grants[0].role is Role.ADMIN


@pytest.mark.parametrize(
    "left_out", ["HERDER_OIDC_CLIENT_ID", "HERDER_OIDC_CLIENT_SECRET", "HERDER_OIDC_GROUPS"]
)
def test_a_sign_in_half_configured_is_refused(left_out: str) -> None:
    with pytest.raises(ValueError, match=left_out.removeprefix("HERDER_")):
        oidc_from({name: value for name, value in BASE.items() if name != left_out})


def test_the_client_secret_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    environment = {**BASE, "HERDER_OIDC_CLIENT_SECRET_FILE": str(secret)}
    del environment["HERDER_OIDC_CLIENT_SECRET"]
    os.chmod(secret, 0o644)
    with pytest.raises(ValueError, match="0600"):
        oidc_from(environment)
    os.chmod(secret, 0o600)
    configured = oidc_from(environment)
    assert configured is not None
    assert configured.client_secret == "from-file"
