"""API keys' rules: when a key stops admitting, and which revocation would lock a tenant out.

A tenant's admin keys are how its keys, and so its access, are managed. Revoking the last
live admin key of the system tenant would leave nobody to manage anything, and revoking a
tenant's last admin key from inside that tenant would leave it to ask the system admins:
both are refused (409) — create another admin key first. The system admins may revoke any
other tenant's last admin key (offboarding, a leak): they can always make a new one.
"""

from __future__ import annotations

from datetime import datetime

from herder.domain.errors import Conflict, Invalid
from herder.domain.models import ApiKey, Role


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
