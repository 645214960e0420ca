"""Signing in to the operator's registries, as the OCI distribution API has it: a registry
answers 401 with a ``WWW-Authenticate`` challenge, ``Basic`` (send the credentials) or
``Bearer realm=…,service=…,scope=…`` (ask the realm for a token with them, anonymously when
there are none, then send the token).

The credentials come from a private file the worker's operator writes
(``HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE``, 0600, read at the worker's start), a JSON object
by registry base URL, as ``HERDER_IMAGE_REGISTRIES`` names them::

    {"https://registry.internal": {"username": "puller", "password": "…"},
     "https://ghcr.example": {"token": "…"}}

They go to that registry and to the token realm it names, never elsewhere: httpx drops the
``Authorization`` header when a registry redirects a blob to storage on another origin, and
a realm on another host is asked only over https.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from herder.domain.images import ImageProblem

CREDENTIALS_VARIABLE = "HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE"
MAX_TOKEN_ANSWER_BYTES = 64 * 1024
_PARAMETER = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*,?'
)


@dataclass(frozen=True)
class RegistryCredentials:
    """A user and password (Basic, or for a token realm), or a token sent as it is."""

    username: str | None = None
    password: str | None = None
    token: str | None = None

    def basic(self) -> str | None:
        if self.username is None or self.password is None:
            return None
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower case: "basic" or "bearer"
    parameters: dict[str, str]


def parse_credentials(text: str) -> dict[str, RegistryCredentials]:
    """The credentials file's registries (base URLs without a trailing slash) and theirs;
    ``ImageProblem`` saying what is wrong, never echoing a secret."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ImageProblem(f"{CREDENTIALS_VARIABLE}: not JSON ({error.msg})") from None
    if not isinstance(document, dict):
        raise ImageProblem(f"{CREDENTIALS_VARIABLE}: a JSON object by registry URL is needed")
    found = {}
    for url, given in document.items():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ImageProblem(f"{CREDENTIALS_VARIABLE}: {url!r} is not an http(s) base URL")
        fields = {"username", "password", "token"}
        if (
            not isinstance(given, dict)
            or not given
            or set(given) - fields
            or not all(isinstance(value, str) and value for value in given.values())
            or ("token" in given) == ("username" in given or "password" in given)
            or ("username" in given) != ("password" in given)
        ):
            raise ImageProblem(
                f"{CREDENTIALS_VARIABLE}: {url!r} needs username and password, or a token "
                "(non-empty strings)"
            )
        found[url.rstrip("/")] = RegistryCredentials(**given)
    return found


def parse_challenge(header: str) -> Challenge | None:
    """``Bearer realm="…",service="…"`` → its scheme and parameters; None if unreadable."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() not in ("basic", "bearer"):
        return None
    parameters, position = {}, 0
    while position < len(rest):
        match = _PARAMETER.match(rest, position)
        if match is None or match.end() == position:
            return None
        quoted, bare = match.group(2), match.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare or ""
        parameters[match.group(1).lower()] = value
        position = match.end()
    return Challenge(scheme.lower(), parameters)


async def authorization(
    client: httpx.AsyncClient,
    base_url: str,
    challenge_header: str,
    credentials: RegistryCredentials | None,
) -> str:
    """The ``Authorization`` value answering a registry's 401 challenge; ``ImageProblem``
    when it cannot be answered (no credentials for a Basic one, a realm that refuses)."""
    challenge = parse_challenge(challenge_header)
    if challenge is None:
        raise ImageProblem(f"{base_url} asked to sign in in a way Herder does not know")
    if credentials is not None and credentials.token is not None:
        return f"Bearer {credentials.token}"
    if challenge.scheme == "basic":
        basic = credentials.basic() if credentials is not None else None
        if basic is None:
            raise ImageProblem(
                f"{base_url} needs credentials: none for it in {CREDENTIALS_VARIABLE}"
            )
        return basic
    return f"Bearer {await _token(client, base_url, challenge, credentials)}"


async def _token(
    client: httpx.AsyncClient,
    base_url: str,
    challenge: Challenge,
    credentials: RegistryCredentials | None,
) -> str:
    realm = challenge.parameters.get("realm", "")
    parts, registry = urlsplit(realm), urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ImageProblem(f"{base_url} named no usable token realm")
    if parts.netloc != registry.netloc and parts.scheme != "https":
        raise ImageProblem(f"{base_url} named a token realm on another host without https")
    query: dict[str, str] = {
        key: value for key, value in challenge.parameters.items() if key in ("service", "scope")
    }
    basic = credentials.basic() if credentials is not None else None
    headers = {"Authorization": basic} if basic is not None else {}
    async with client.stream("GET", realm, params=query, headers=headers) as response:
        if response.status_code in (401, 403):
            raise ImageProblem(
                f"the token realm of {base_url} refused its credentials ({response.status_code})"
                if basic is not None
                else f"{base_url} needs credentials: none for it in {CREDENTIALS_VARIABLE}"
            )
        if response.status_code != 200:
            raise ImageProblem(f"the token realm of {base_url} answered {response.status_code}")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_TOKEN_ANSWER_BYTES:
                raise ImageProblem(f"the token realm of {base_url} answered too much")
    try:
        answer = json.loads(body)
        token = answer.get("token") or answer.get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise ImageProblem(f"the token realm of {base_url} gave no token")
    return token
