"""API keys' rules: when a key stops admitting, and which revocation would lock a tenant out.

A tenant's admin keys are how its keys, and so its access, are managed. Revoking the last
live admin key of the system tenant would leave nobody to manage anything, and revoking a
tenant's last admin key from inside that tenant would leave it to ask the system admins:
both are refused (409) — create another admin key first. The system admins may revoke any
other tenant's last admin key (offboarding, a leak): they can always make a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from herder.domain.errors import Conflict, Invalid
from herder.domain.models import ApiKey, Role

TENANT_PREFIX = "ten_"
KEY_PREFIX = "key_"


@dataclass(frozen=True)
class ApiToken:
    """An API key as its holder sends it: ``<tenant id>.<key id>.<secret>``, so that an
    edge routes it to its tenant's cell without a lookup (docs/cells.md); a key made before
    cells is ``<key id>.<secret>`` (``tenant_id`` None) and still admits. The tenant part
    only routes: the store admits the token when the key's own tenant is the one named."""

    tenant_id: str | None
    key_id: str
    secret: str

    def __str__(self) -> str:
        prefix = f"{self.tenant_id}." if self.tenant_id is not None else ""
        return f"{prefix}{self.key_id}.{self.secret}"


def parse_api_token(token: str) -> ApiToken | None:
    """The parts of ``token``, or None when it has neither two nor three non-empty parts."""
    parts = token.split(".")
    if not all(parts):
        return None
    if len(parts) == 3:
        return ApiToken(parts[0], parts[1], parts[2])
    if len(parts) == 2:
        return ApiToken(None, parts[0], parts[1])
    return None


def is_api_key(token: str) -> bool:
    """Whether ``token`` is shaped as an API key (of either form), not a worker's credential."""
    return token.startswith((KEY_PREFIX, TENANT_PREFIX))


def refusal(key: ApiKey, now: datetime) -> str | None:
    """Why ``key`` no longer admits anyone at ``now`` (None: it does)."""
    if key.revoked_at is not None:
        return f"API key {key.id} was revoked at {key.revoked_at.isoformat()}"
    if key.expires_at is not None and key.expires_at <= now:
        return f"API key {key.id} expired at {key.expires_at.isoformat()}"
    return None


def check_expiry(expires_at: datetime | None, now: datetime) -> None:
    if expires_at is not None and expires_at <= now:
        raise Invalid("expires_at must be in the future", field="expires_at")


def check_revocation(
    key: ApiKey,
    *,
    other_live_admins: int,
    tenant_is_system: bool,
    by_outside_admin: bool,
    now: datetime,
) -> None:
    """Refuse a revocation that would leave a tenant without a live admin key.

    ``by_outside_admin``: a system admin revoking a key of another tenant than the system's.
    """
    if key.role is not Role.ADMIN or refusal(key, now) is not None or other_live_admins:
        return
    if tenant_is_system:
        raise Conflict(
            f"{key.id} is the system tenant's last live admin key: create another admin key "
            "before revoking it"
        )
    if not by_outside_admin:
        raise Conflict(
            f"{key.id} is the tenant's last live admin key: create another admin key before "
            "revoking it (or ask a system admin)"
        )
