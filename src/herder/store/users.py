"""People signed in through OpenID Connect and their sessions (docs/tenants.md "Single
sign-on"). A sign-in is one write: the person upserted by (issuer, subject), a session made
for the tenant and role their claims gave. A session's secret is shown once (its token,
``hse_<id>.<secret>``) and stored as its sha256; a session admits until it expires or is
revoked, checked like an API key: at most ``_RecentlyChecked.TTL_SECONDS`` stale."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Forbidden, NotFound, Unauthorized
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal, Role
from herder.domain.sign_in import Person, Session, SessionToken, parse_session_token
from herder.store.access import _RecentlyChecked, hash_secret
from herder.store.database import Database
from herder.store.pagination import page_of
from herder.store.schema import sessions, tenants, users

UNKNOWN_SESSION = "unknown, expired or revoked session: sign in again"


@dataclass(frozen=True)
class _AdmittedSession:
    principal: Principal
    expires_at: datetime


_LISTED = [
    sessions.c.id,
    sessions.c.user_id,
    users.c.name.label("user_name"),
    users.c.email,
    sessions.c.tenant_id,
    sessions.c.role,
    sessions.c.kind,
    sessions.c.created_at,
    sessions.c.expires_at,
    sessions.c.revoked_at,
]


class UserRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        self._recent = _RecentlyChecked()

    def sign_in(
        self, person: Person, tenant_id: str, role: Role, *, kind: str, lifetime: timedelta
    ) -> tuple[Session, str]:
        """Upsert ``person`` into ``tenant_id`` and open a session; its token is the only copy
        of its secret."""
        now = self._clock.now()
        session_id = new_id("ses", epoch_ms(now))
        secret = secrets.token_urlsafe(32)
        with self._db.write() as connection:
            user_id = self._upsert(connection, person, tenant_id, now)
            connection.execute(
                insert(sessions).values(
                    id=session_id,
                    user_id=user_id,
                    tenant_id=tenant_id,
                    role=role.value,
                    kind=kind,
                    secret_hash=hash_secret(secret),
                    created_at=now,
                    expires_at=now + lifetime,
                )
            )
        session = Session(
            id=session_id,
            user_id=user_id,
            user_name=person.name,
            email=person.email,
            tenant_id=tenant_id,
            role=role,
            kind=kind,
            created_at=now,
            expires_at=now + lifetime,
        )
        return session, str(SessionToken(session_id, secret))

    def _upsert(self, connection: Connection, person: Person, tenant_id: str, now: datetime) -> str:
        """The person's id, their row made or brought up to date (their tenant too: their
        groups may have changed). A first sign-in racing another of the same person fails on
        the unique (issuer, subject), and the caller signs in again."""
        known = (users.c.issuer == person.issuer) & (users.c.subject == person.subject)
        values = {"tenant_id": tenant_id, "name": person.name, "email": person.email}
        user_id = connection.execute(
            update(users).where(known).values(**values, last_seen_at=now).returning(users.c.id)
        ).scalar()
        if user_id is not None:
            return str(user_id)
        user_id = new_id("usr", epoch_ms(now))
        connection.execute(
            insert(users).values(
                id=user_id,
                issuer=person.issuer,
                subject=person.subject,
                created_at=now,
                last_seen_at=now,
                **values,
            )
        )
        return str(user_id)

    def tenant_id(self, tenant: str) -> str:
        """The id of the tenant a sign-in mapping names, by its id or its name."""
        with self._db.read() as connection:
            found = connection.execute(
                select(tenants.c.id).where((tenants.c.id == tenant) | (tenants.c.name == tenant))
            ).scalar()
        if found is None:
            raise Forbidden(
                f"your sign-in maps you to tenant {tenant!r}, which Herder does not have"
            )
        return str(found)

    def recent_principal(self, token: str) -> Principal | None:
        """The caller, if this session was verified in the last few seconds and has not
        expired since (no store access)."""
        cached = self._recent.get(token)
        if isinstance(cached, _AdmittedSession) and cached.expires_at > self._clock.now():
            return cached.principal
        return None

    def authenticate(self, token: str) -> Principal:
        """The caller a session's token stands for, else ``Unauthorized``."""
        if cached := self.recent_principal(token):
            return cached
        now = self._clock.now()
        parsed = parse_session_token(token)
        if parsed is None:
            raise Unauthorized(UNKNOWN_SESSION)
        with self._db.read() as connection:
            row = connection.execute(
                select(
                    sessions,
                    users.c.name,
                    users.c.email,
                    tenants.c.is_system,
                    tenants.c.move_state,
                    tenants.c.move_cell,
                )
                .join(users, users.c.id == sessions.c.user_id)
                .join(tenants, tenants.c.id == sessions.c.tenant_id)
                .where(sessions.c.id == parsed.session_id)
            ).first()
        if (
            row is None
            or not hmac.compare_digest(row.secret_hash, hash_secret(parsed.secret))
            or row.revoked_at is not None
            or row.expires_at <= now
        ):
            raise Unauthorized(UNKNOWN_SESSION)
        principal = Principal(
            tenant_id=row.tenant_id,
            role=Role(row.role),
            key_id=row.id,
            is_system=row.is_system,
            key_name=f"{row.kind} session of {row.name}",
            user_id=row.user_id,
            user_name=row.name,
            email=row.email,
            move_state=row.move_state,
            move_cell=row.move_cell,
        )
        self._recent.put(token, _AdmittedSession(principal, row.expires_at))
        return principal

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[Session]:
        """The tenant's sessions, newest first, ended ones too."""
        query = (
            select(*_LISTED)
            .join(users, users.c.id == sessions.c.user_id)
            .where(sessions.c.tenant_id == tenant_id)
        )
        with self._db.read() as connection:
            return page_of(connection, query, sessions.c.id, _session, page)

    def revoke(self, tenant_id: str, session_id: str) -> Session:
        """End the session at once (here; in other processes within their cache's time)."""
        now = self._clock.now()
        with self._db.write() as connection:
            connection.execute(
                update(sessions)
                .where(
                    sessions.c.id == session_id,
                    sessions.c.tenant_id == tenant_id,
                    sessions.c.revoked_at.is_(None),
                )
                .values(revoked_at=now)
            )
            row = connection.execute(
                select(*_LISTED)
                .join(users, users.c.id == sessions.c.user_id)
                .where(sessions.c.id == session_id, sessions.c.tenant_id == tenant_id)
            ).first()
        if row is None:
            raise NotFound(f"session {session_id} not found")
        self._recent.forget(
            lambda value: (
                isinstance(value, _AdmittedSession) and value.principal.key_id == session_id
            )
        )
        return _session(row)


def _session(row: object) -> Session:
    return Session.model_validate(row._mapping)  # type: ignore[attr-defined]
