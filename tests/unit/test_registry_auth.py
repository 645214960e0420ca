"""Signing in to a registry: its challenge read, the operator's credentials file checked,
and the answer — Basic, a static token, or a token from the realm for the credentials."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest

from herder.domain.images import ImageProblem
from herder.worker.registry_auth import (
    Challenge,
    RegistryCredentials,
    authorization,
    parse_challenge,
    parse_credentials,
)

BASE = "https://registry.internal"
PULLER = RegistryCredentials(username="puller", password="s3cret")
BASIC = "Basic " + base64.b64encode(b"puller:s3cret").decode()


@pytest.mark.parametrize(
    ("header", "challenge"),
    [
        ('Basic realm="registry"', Challenge("basic", {"realm": "registry"})),
        (
            'Bearer realm="https://auth.example/token",service="registry.example",'
            'scope="repository:tools/app:pull"',
            Challenge(
                "bearer",
                {
                    "realm": "https://auth.example/token",
                    "service": "registry.example",
                    "scope": "repository:tools/app:pull",
                },
            ),
        ),
        (
            'bearer realm="a\\"b", service=bare',
            Challenge("bearer", {"realm": 'a"b', "service": "bare"}),
        ),
        ("Negotiate abc", None),
        ('Bearer realm="unterminated', None),
        ("", None),
    ],
)
def test_a_challenge_is_read_or_refused(header: str, challenge: Challenge | None) -> None:
    assert parse_challenge(header) == challenge


def test_the_credentials_file_gives_each_registry_its_credentials() -> None:
    text = json.dumps(
        {
            f"{BASE}/": {"username": "puller", "password": "s3cret"},
            "http://ghcr.test": {"token": "t"},
        }
    )
    assert parse_credentials(text) == {
        BASE: PULLER,
        "http://ghcr.test": RegistryCredentials(token="t"),
    }


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[]",
        json.dumps({"ftp://x": {"token": "t"}}),
        json.dumps({BASE: {"username": "puller"}}),
        json.dumps({BASE: {"token": "t", "username": "u", "password": "p"}}),
        json.dumps({BASE: {"token": ""}}),
        json.dumps({BASE: {"token": 5}}),
        json.dumps({BASE: {"cookie": "c"}}),
        json.dumps({BASE: "s3cret"}),
    ],
)
def test_a_credentials_file_that_cannot_be_used_is_refused_without_its_secrets(
    document: str,
) -> None:
    with pytest.raises(ImageProblem) as refused:
        parse_credentials(document)
    assert "s3cret" not in str(refused.value)


def answered(
    header: str, credentials: RegistryCredentials | None, realm: httpx.MockTransport
) -> str:
    async def answer() -> str:
        async with httpx.AsyncClient(transport=realm) as client:
            return await authorization(client, BASE, header, credentials)

    return asyncio.run(answer())


def token_realm(expected_authorization: str | None) -> httpx.MockTransport:
    """A token realm giving a token to those who send ``expected_authorization``."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != expected_authorization:
            return httpx.Response(401)
        assert request.url.params["scope"] == "repository:tools/app:pull"
        return httpx.Response(200, json={"access_token": "t0k"})

    return httpx.MockTransport(handle)


BEARER = 'Bearer realm="https://registry.internal/token",scope="repository:tools/app:pull"'


def test_a_bearer_challenge_is_answered_with_the_realms_token_for_the_credentials() -> None:
    assert answered(BEARER, PULLER, token_realm(BASIC)) == "Bearer t0k"


def test_an_anonymous_pull_token_is_asked_for_without_credentials() -> None:
    assert answered(BEARER, None, token_realm(None)) == "Bearer t0k"


def test_a_realm_that_refuses_says_whether_credentials_were_missing_or_refused() -> None:
    with pytest.raises(ImageProblem, match="needs credentials"):
        answered(BEARER, None, token_realm(BASIC))
    wrong = RegistryCredentials(username="puller", password="wrong")
    with pytest.raises(ImageProblem, match="refused its credentials"):
        answered(BEARER, wrong, token_realm(BASIC))


def test_basic_and_static_tokens_need_no_realm() -> None:
    nowhere = token_realm("never asked")
    assert answered('Basic realm="r"', PULLER, nowhere) == BASIC
    assert answered(BEARER, RegistryCredentials(token="static"), nowhere) == "Bearer static"
    with pytest.raises(ImageProblem, match="needs credentials"):
        answered('Basic realm="r"', None, nowhere)


def test_credentials_never_go_to_a_realm_on_another_host_over_plain_http() -> None:
    elsewhere = 'Bearer realm="http://collector.example/token"'
    with pytest.raises(ImageProblem, match="another host without https"):
        answered(elsewhere, PULLER, token_realm(BASIC))
