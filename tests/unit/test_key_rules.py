"""When a key stops admitting, and which revocations would lock a tenant out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.errors import Conflict, Invalid
from herder.domain.keys import check_expiry, check_revocation, refusal
from herder.domain.models import ApiKey, Role

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def key(role: Role = Role.ADMIN, **fields: object) -> ApiKey:
    return ApiKey.model_validate(
        {"id": "key_1", "tenant_id": "ten_1", "name": "k", "role": role, "created_at": NOW,
         **fields}
    )  # fmt: skip


def test_a_key_refuses_from_its_revocation_or_its_expiry() -> None:
    assert refusal(key(), NOW) is None
    assert refusal(key(expires_at=NOW + timedelta(seconds=1)), NOW) is None
    assert "expired at" in (refusal(key(expires_at=NOW), NOW) or "")
    assert "was revoked at" in (refusal(key(revoked_at=NOW, expires_at=NOW), NOW) or "")


def test_an_expiry_must_be_in_the_future() -> None:
    check_expiry(None, NOW)
    check_expiry(NOW + timedelta(seconds=1), NOW)
    with pytest.raises(Invalid) as refused:
        check_expiry(NOW, NOW)
    assert refused.value.field == "expires_at"


@pytest.mark.parametrize(
    ("revoked", "others", "system", "outside", "allowed"),
    [
        (key(), 0, True, False, False),  # the system tenant's last admin
        (key(), 0, False, False, False),  # a tenant's own last admin, by itself
        (key(), 0, False, True, True),  # a system admin offboarding a tenant
        (key(), 1, True, False, True),  # another admin remains
        (key(Role.DEVELOPER), 0, True, False, True),  # not an admin key
        (key(expires_at=NOW), 0, True, False, True),  # already admits nobody
    ],
)
def test_no_revocation_leaves_a_tenant_to_lock_itself_out(
    revoked: ApiKey, others: int, system: bool, outside: bool, allowed: bool
) -> None:
    def revoke() -> None:
        check_revocation(
            revoked, other_live_admins=others, tenant_is_system=system,
            by_outside_admin=outside, now=NOW,
        )  # fmt: skip

    if allowed:
        revoke()
    else:
        with pytest.raises(Conflict, match="last live admin key"):
            revoke()
