"""Single sign-on's rules (docs/tenants.md "Single sign-on"): which tenant and role a person's
claims give them, where a sign-in may send the browser back to, and the shape of a session's
token. Pure: the provider's answers come in as data.

A person maps to a tenant and a role either by two claims (``HERDER_OIDC_TENANT_CLAIM``,
``HERDER_OIDC_ROLE_CLAIM``) or by their groups (``HERDER_OIDC_GROUPS``: ``group=tenant:role``
pairs): of the groups they are in, the pairs naming one tenant, the highest role wins; groups
naming several tenants are refused, as is a person no pair names."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel

from herder.domain.errors import Forbidden, Invalid, Unauthorized
from herder.domain.models import Role

SESSION_TOKEN_PREFIX = "hse_"
SESSION_ID_PREFIX = "ses_"
DASHBOARD_HOME = "/"


class Person(BaseModel):
    """Who signs in, as their provider says."""

    issuer: str
    subject: str
    name: str
    email: str = ""


class Session(BaseModel):
    """A session as its tenant's admins see it (never its secret)."""

    id: str
    user_id: str
    user_name: str
    email: str
    tenant_id: str
    role: Role
    kind: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class GroupGrant:
    """``group=tenant:role``: the group's members get ``role`` in ``tenant`` (a name or id)."""

    group: str
    tenant: str
    role: Role


@dataclass(frozen=True)
class Assignment:
    """Where a person signs in to: a tenant (its name or id, as configured) and a role."""

    tenant: str
    role: Role


def parse_group_grants(text: str) -> tuple[GroupGrant, ...]:
    """``ops=acme:admin,devs=acme:developer``; ``ValueError`` naming the pair at fault."""
    grants = []
    for pair in filter(None, (part.strip() for part in text.split(","))):
        group, _, assignment = pair.partition("=")
        tenant, _, role = assignment.rpartition(":")
        if not group.strip() or not tenant.strip() or role not in Role.__members__.values():
            raise ValueError(
                f"HERDER_OIDC_GROUPS: {pair!r} is not 'group=tenant:role' with a role of "
                f"{', '.join(Role)}"
            )
        grants.append(GroupGrant(group.strip(), tenant.strip(), Role(role)))
    return tuple(grants)


def assign(
    claims: Mapping[str, object],
    *,
    tenant_claim: str | None,
    role_claim: str | None,
    groups_claim: str,
    grants: Sequence[GroupGrant],
) -> Assignment:
    """The tenant and role ``claims`` give, else ``Forbidden`` saying why."""
    if tenant_claim:
        tenant = claims.get(tenant_claim)
        role = claims.get(role_claim or "", Role.VIEWER.value)
        if not isinstance(tenant, str) or not tenant:
            raise Forbidden(f"your sign-in carries no {tenant_claim!r}: ask for a tenant")
        if not isinstance(role, str) or role not in Role.__members__.values():
            raise Forbidden(f"your sign-in's {role_claim!r} is not one of {', '.join(Role)}")
        return Assignment(tenant, Role(role))
    groups = claims.get(groups_claim)
    member_of = (
        {group for group in groups if isinstance(group, str)} if isinstance(groups, list) else set()
    )
    granted = [grant for grant in grants if grant.group in member_of]
    if not granted:
        raise Forbidden("none of your groups is given a tenant in Herder: ask an administrator")
    tenants = {grant.tenant for grant in granted}
    if len(tenants) > 1:
        raise Forbidden(
            f"your groups give you several tenants ({', '.join(sorted(tenants))}): "
            "Herder signs a person in to one; ask an administrator"
        )
    role = max((grant.role for grant in granted), key=_rank)
    return Assignment(granted[0].tenant, role)


def _rank(role: Role) -> int:
    return sum(role.includes(other) for other in Role)


def return_path(next_path: str | None) -> str:
    """Where the dashboard goes after signing in: a path of this server only, never another
    site (``https://evil.example``, ``//evil.example``, ``/\\evil.example``): 422 otherwise."""
    if not next_path:
        return DASHBOARD_HOME
    parts = urlsplit(next_path)
    if (
        not next_path.startswith("/")
        or next_path.startswith(("//", "/\\"))
        or parts.scheme
        or parts.netloc
        or any(ord(character) < 0x20 or character == "\\" for character in next_path)
        or len(next_path) > 2048
    ):
        raise Invalid("next must be a path of this dashboard, such as /runs", field="next")
    return next_path


@dataclass(frozen=True)
class SessionToken:
    """``hse_<session id>.<secret>``: the cookie's value, or the CLI's bearer."""

    session_id: str
    secret: str

    def __str__(self) -> str:
        return f"{SESSION_TOKEN_PREFIX}{self.session_id}.{self.secret}"


def parse_session_token(token: str) -> SessionToken | None:
    if not token.startswith(SESSION_TOKEN_PREFIX):
        return None
    session_id, _, secret = token.removeprefix(SESSION_TOKEN_PREFIX).partition(".")
    if not session_id.startswith(SESSION_ID_PREFIX) or not secret or len(session_id) > 40:
        return None
    return SessionToken(session_id, secret)


def csrf_token(session_token: str) -> str:
    """The header a cookie-signed request's change must carry: derived from the cookie's secret,
    which another site can neither read nor guess, so it cannot send it."""
    return hmac.new(session_token.encode(), b"herder csrf", hashlib.sha256).hexdigest()


CLOCK_SKEW_SECONDS = 60  # a provider's clock this far ahead of ours is still believed


def check_id_token(
    claims: Mapping[str, object],
    *,
    issuer: str,
    client_id: str,
    nonce: str,
    now_seconds: float,
) -> None:
    """An ID token's claims, its signature already checked (OpenID Connect Core §3.1.3.7):
    from our issuer, for us, not expired, issued for this very sign-in (its nonce); else
    ``Unauthorized`` saying which."""
    if claims.get("iss") != issuer:
        raise Unauthorized("the ID token is from another issuer than Herder's provider")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if client_id not in audiences:
        raise Unauthorized("the ID token was issued for another application")
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise Unauthorized("the ID token was issued for another application (azp)")
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or expires + CLOCK_SKEW_SECONDS <= now_seconds:
        raise Unauthorized("the ID token has expired: sign in again")
    issued = claims.get("iat")
    if not isinstance(issued, int | float) or issued - CLOCK_SKEW_SECONDS > now_seconds:
        raise Unauthorized("the ID token is issued in the future")
    given = claims.get("nonce")
    if not isinstance(given, str) or not hmac.compare_digest(given, nonce):
        raise Unauthorized("the ID token belongs to another sign-in (nonce): sign in again")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise Unauthorized("the ID token names nobody (no sub)")
