"""Herder as an OpenID Connect relying party (docs/tenants.md "Single sign-on"): the
provider's metadata and keys, cached; the authorization code exchanged (with its PKCE
verifier) and its ID token checked — signature by the provider's published keys (fetched
again once when a token names a key not seen yet), then ``domain.sign_in.check_id_token``;
a CLI's access token checked by introspection (issued to the CLI's client, live) and read by
userinfo. Every failure is ``Unauthorized`` (or ``Unavailable`` when the provider cannot be
reached), never a 500."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from herder.domain.errors import Unauthorized, Unavailable
from herder.domain.sign_in import check_id_token
from herder.settings import OidcSettings

TIMEOUT_SECONDS = 10.0  # a call to the provider
METADATA_SECONDS = 3600.0  # the provider's metadata and keys are read again after this
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
SCOPES = "openid profile email groups"


@dataclass(frozen=True)
class Metadata:
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    introspection_endpoint: str
    device_authorization_endpoint: str


@dataclass(frozen=True)
class Pkce:
    """A sign-in's secrets: the state (bound to the browser), the nonce (bound into the ID
    token) and the PKCE verifier (bound to the code)."""

    state: str
    nonce: str
    verifier: str

    @classmethod
    def new(cls) -> Pkce:
        return cls(secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class Provider:
    """One per process and issuer: its caches outlive a request."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._metadata: tuple[float, Metadata] | None = None
        self._keys: tuple[float, KeySet] | None = None

    async def metadata(self) -> Metadata:
        if self._metadata is not None and self._metadata[0] > time.monotonic():
            return self._metadata[1]
        issuer = self.settings.issuer
        document = await self._get_json(f"{issuer.rstrip('/')}/.well-known/openid-configuration")
        if document.get("issuer") != issuer:
            raise Unauthorized(
                f"the provider at {issuer} names another issuer ({document.get('issuer')!r}): "
                "HERDER_OIDC_ISSUER must be exactly its issuer"
            )
        try:
            metadata = Metadata(
                authorization_endpoint=str(document["authorization_endpoint"]),
                token_endpoint=str(document["token_endpoint"]),
                userinfo_endpoint=str(document["userinfo_endpoint"]),
                jwks_uri=str(document["jwks_uri"]),
                introspection_endpoint=str(
                    document.get("introspection_endpoint") or f"{issuer.rstrip('/')}/introspect/"
                ),
                device_authorization_endpoint=str(
                    document.get("device_authorization_endpoint")
                    or f"{issuer.rstrip('/')}/device-authorization/"
                ),
            )
        except KeyError as missing:
            raise Unavailable(f"the provider's metadata lacks {missing}") from None
        self._metadata = (time.monotonic() + METADATA_SECONDS, metadata)
        return metadata

    def authorization_url(self, metadata: Metadata, pkce: Pkce, redirect_uri: str) -> str:
        query = httpx.QueryParams(
            response_type="code",
            client_id=self.settings.client_id,
            redirect_uri=redirect_uri,
            scope=SCOPES,
            state=pkce.state,
            nonce=pkce.nonce,
            code_challenge=pkce.challenge,
            code_challenge_method="S256",
        )
        return f"{metadata.authorization_endpoint}?{query}"

    async def sign_in(self, code: str, pkce: Pkce, redirect_uri: str) -> dict[str, Any]:
        """The ID token's claims for ``code``, checked, with the userinfo's claims added
        (a provider may keep groups or email out of the ID token)."""
        metadata = await self.metadata()
        answer = await self._post_json(
            metadata.token_endpoint,
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": pkce.verifier,
            },
            refusal="the provider refused the sign-in's code (used already, expired or not ours)",
        )
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise Unauthorized("the provider gave no ID token")
        claims = await self.id_token_claims(id_token, nonce=pkce.nonce, now_seconds=time.time())
        access_token = answer.get("access_token")
        if isinstance(access_token, str):
            userinfo = await self.userinfo(access_token)
            if userinfo.get("sub") == claims["sub"]:
                claims = {**userinfo, **claims}
        return claims

    async def id_token_claims(
        self, id_token: str, *, nonce: str, now_seconds: float
    ) -> dict[str, Any]:
        """The claims of ``id_token`` once its signature and claims are checked."""
        try:
            decoded = jwt.decode(id_token, await self._key_set(), algorithms=SIGNING_ALGORITHMS)
        except InvalidKeyIdError:
            try:  # a key the provider rotated in since the cached set was read
                decoded = jwt.decode(
                    id_token, await self._key_set(refresh=True), algorithms=SIGNING_ALGORITHMS
                )
            except (JoseError, ValueError) as again:
                raise Unauthorized(f"the ID token's signature does not verify: {again}") from None
        except (JoseError, ValueError) as error:
            raise Unauthorized(f"the ID token does not verify: {error}") from None
        claims = dict(decoded.claims)
        check_id_token(
            claims,
            issuer=self.settings.issuer,
            client_id=self.settings.client_id,
            nonce=nonce,
            now_seconds=now_seconds,
        )
        return claims

    async def cli_claims(self, access_token: str) -> dict[str, Any]:
        """Who holds ``access_token``, once the provider says it is live and was issued to
        Herder's CLI client (not to another application, whose tokens Herder never takes)."""
        cli_client = self.settings.cli_client_id
        if cli_client is None:
            raise Unauthorized("sign-in from the CLI is off: HERDER_OIDC_CLI_CLIENT_ID is unset")
        metadata = await self.metadata()
        introspection = await self._post_json(
            metadata.introspection_endpoint,
            {"token": access_token},
            refusal="the provider would not say whether the token is live",
        )
        if introspection.get("active") is not True:
            raise Unauthorized("the access token is expired, revoked or unknown to the provider")
        if introspection.get("client_id") != cli_client:
            raise Unauthorized("the access token was issued to another application")
        claims = await self.userinfo(access_token)
        if not isinstance(claims.get("sub"), str):
            raise Unauthorized("the provider's userinfo names nobody (no sub)")
        return claims

    async def userinfo(self, access_token: str) -> dict[str, Any]:
        metadata = await self.metadata()
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
                response = await http.get(
                    metadata.userinfo_endpoint,
                    headers={"Authorization": f"Bearer {access_token}"},
                )
        except httpx.HTTPError as error:
            raise Unavailable(f"the OpenID provider cannot be reached: {error}") from None
        if response.status_code != 200:
            raise Unauthorized("the provider refused the access token at userinfo")
        return _object(response)

    async def _key_set(self, *, refresh: bool = False) -> KeySet:
        if not refresh and self._keys is not None and self._keys[0] > time.monotonic():
            return self._keys[1]
        metadata = await self.metadata()
        document = await self._get_json(metadata.jwks_uri)
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError) as error:
            raise Unavailable(f"the provider's keys cannot be read: {error}") from None
        self._keys = (time.monotonic() + METADATA_SECONDS, keys)
        return keys

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
                response = await http.get(url)
        except httpx.HTTPError as error:
            raise Unavailable(f"the OpenID provider cannot be reached: {error}") from None
        if response.status_code != 200:
            raise Unavailable(f"the OpenID provider answered {response.status_code} at {url}")
        return _object(response)

    async def _post_json(self, url: str, form: dict[str, str], *, refusal: str) -> dict[str, Any]:
        """A form posted as Herder's own (confidential) client."""
        auth = httpx.BasicAuth(self.settings.client_id, self.settings.client_secret)
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
                response = await http.post(url, data=form, auth=auth)
        except httpx.HTTPError as error:
            raise Unavailable(f"the OpenID provider cannot be reached: {error}") from None
        if response.status_code >= 500:
            raise Unavailable(f"the OpenID provider answered {response.status_code}")
        if response.status_code != 200:
            raise Unauthorized(refusal)
        return _object(response)


def _object(response: httpx.Response) -> dict[str, Any]:
    try:
        document = response.json()
    except ValueError:
        raise Unavailable("the OpenID provider answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise Unavailable("the OpenID provider answered something that is not a JSON object")
    return document
