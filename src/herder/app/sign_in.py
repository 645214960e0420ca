"""A person signed in (docs/tenants.md "Single sign-on"): the claims their provider vouched
for mapped to a tenant and role (``domain.sign_in.assign``), the tenant found by its name or
id, the person upserted and a session opened for them, in one write."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from herder.domain.errors import Unauthorized
from herder.domain.sign_in import Person, Session, assign
from herder.settings import OidcSettings
from herder.store.store import Store

NAME_LENGTH = 255


def sign_in(
    store: Store, settings: OidcSettings, claims: Mapping[str, object], *, kind: str
) -> tuple[Session, str]:
    """A session for the person ``claims`` name; its token is the only copy of its secret.
    ``Forbidden`` when their claims give them no tenant (or one Herder lacks)."""
    assignment = assign(
        claims,
        tenant_claim=settings.tenant_claim,
        role_claim=settings.role_claim,
        groups_claim=settings.groups_claim,
        grants=settings.group_grants,
    )
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.isprintable() or len(subject) > NAME_LENGTH:
        raise Unauthorized("the provider names this person by a subject Herder cannot keep")
    tenant_id = store.users.tenant_id(assignment.tenant)
    email = _text(claims.get("email"))
    person = Person(
        issuer=settings.issuer,
        subject=subject,
        name=_text(claims.get("preferred_username")) or email or subject,
        email=email,
    )
    return store.users.sign_in(
        person,
        tenant_id,
        assignment.role,
        kind=kind,
        lifetime=timedelta(hours=settings.session_hours),
    )


def _text(value: object) -> str:
    """A claim as a name Herder shows: text, printable, bounded; else empty."""
    if not isinstance(value, str) or not value.isprintable():
        return ""
    return value[:NAME_LENGTH]
