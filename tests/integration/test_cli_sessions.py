"""``herder session list|revoke`` against the in-process API (both stores): sessions made
through the store as a sign-in makes them (docs/tenants.md "Single sign-on")."""

from __future__ import annotations

import json
from datetime import timedelta

from typer.testing import Result

from herder.cli.ids import short_ids
from herder.client import ApiError
from herder.domain.models import Role
from herder.domain.sign_in import Person
from tests.integration.conftest import Api, Herder

ISSUER = "https://sso.example.com"
HOURS = timedelta(hours=8)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def signed_in(api: Api, name: str, role: Role, kind: str) -> tuple[str, str]:
    """A session of ``name`` in the admin's tenant: its id and its bearer token."""
    person = Person(issuer=ISSUER, subject=name, name=name, email=f"{name}@example.com")
    session, token = api.store.users.sign_in(person, api.tenant_id, role, kind=kind, lifetime=HOURS)
    return session.id, token


def test_an_admin_lists_the_live_sessions_and_revokes_one(api: Api, herder: Herder) -> None:
    alice, alice_token = signed_in(api, "alice", Role.VIEWER, "cli")
    bob, _ = signed_in(api, "bob", Role.OPERATOR, "dashboard")
    assert ok(herder("job", "list", key=alice_token))  # her session admits her

    listing = ok(herder("session", "list"))
    shown = short_ids([alice, bob])
    for session_id, person, role, kind in (
        (alice, "alice", "viewer", "cli"),
        (bob, "bob", "operator", "dashboard"),
    ):
        (line,) = [line for line in listing.splitlines() if shown[session_id] in line]
        assert all(word in line for word in (person, f"{person}@example.com", role, kind, "live"))
    assert alice_token.rpartition(".")[2] not in listing  # never a secret
    assert ok(herder("session", "list", "-q")).split() == [bob, alice]  # newest first

    revoked = ok(herder("session", "revoke", shown[alice]))  # the start a table shows
    assert f"revoked the cli session {alice} of alice" in revoked
    refused = herder("job", "list", key=alice_token)
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 401

    assert ok(herder("session", "list", "-q")).split() == [bob]  # live ones only
    every = json.loads(ok(herder("session", "list", "--all", "--json")))["items"]
    assert [(one["id"], one["revoked_at"] is not None) for one in every] == [
        (bob, False),
        (alice, True),
    ]
    assert "revoked" in ok(herder("session", "list", "--all"))


def test_only_a_tenant_admin_sees_or_ends_sessions(api: Api, herder: Herder) -> None:
    session_id, _ = signed_in(api, "carol", Role.DEVELOPER, "cli")
    _, developer = api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "dev")
    for args in (("session", "list"), ("session", "revoke", session_id)):
        refused = herder(*args, key=developer)
        assert isinstance(refused.exception, ApiError)
        assert refused.exception.status == 403
    other = api.other_tenant_key()  # another tenant's admin: not its session
    refused = herder("session", "revoke", session_id, key=other)
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 404
    assert ok(herder("session", "list", "-q", key=other)).split() == []
