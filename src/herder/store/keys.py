"""A tenant's API keys as its admins see them: listed, read and revoked (never the secret nor
its hash). Creating a key and checking one are in ``herder.store.access``."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func, or_, select, update

from herder.clock import Clock
from herder.domain.errors import NotFound
from herder.domain.keys import check_revocation
from herder.domain.listings import PageRequest
from herder.domain.models import ApiKey, Page, Role
from herder.store.database import Database
from herder.store.pagination import page_of
from herder.store.schema import api_keys, tenants

_LISTED = [column for column in api_keys.c if column.name != "secret_hash"]


def _key(row: object) -> ApiKey:
    return ApiKey.model_validate(row._mapping)  # type: ignore[attr-defined]


class KeyRepository:
    def __init__(self, database: Database, clock: Clock, forget: Callable[[str], None]) -> None:
        """``forget``: drops a key from this process's recent-keys cache once it is revoked."""
        self._db = database
        self._clock = clock
        self._forget = forget

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[ApiKey]:
        """The tenant's keys, newest first, revoked and expired ones too."""
        query = select(*_LISTED).where(api_keys.c.tenant_id == tenant_id)
        with self._db.read() as connection:
            return page_of(connection, query, api_keys.c.id, _key, page)

    def get(self, key_id: str) -> ApiKey:
        """Any tenant's key: the caller's right to see it is checked by the service."""
        with self._db.read() as connection:
            row = connection.execute(select(*_LISTED).where(api_keys.c.id == key_id)).first()
        if row is None:
            raise NotFound(f"API key {key_id} not found")
        return _key(row)

    def revoke(self, tenant_id: str, key_id: str, *, by_outside_admin: bool) -> ApiKey:
        """Revoke the key at once (a revoked key stays revoked: revoking again changes
        nothing). The tenant's row is locked so that two admins revoking each other's keys
        cannot both pass the last-admin check."""
        with self._db.write() as connection:
            is_system = connection.execute(
                select(tenants.c.is_system)
                .where(tenants.c.id == tenant_id)
                # FOR NO KEY UPDATE: revokers take turns, and none waits on the KEY SHARE
                .with_for_update(key_share=True)  # each write of the tenant holds (moves/guard)
            ).scalar()
            row = connection.execute(
                select(*_LISTED).where(api_keys.c.id == key_id, api_keys.c.tenant_id == tenant_id)
            ).first()
            if is_system is None or row is None:
                raise NotFound(f"API key {key_id} not found")
            key = _key(row)
            if key.revoked_at is not None:
                return key
            now = self._clock.now()
            other_live_admins = connection.execute(
                select(func.count())
                .select_from(api_keys)
                .where(
                    api_keys.c.tenant_id == tenant_id,
                    api_keys.c.id != key_id,
                    api_keys.c.role == Role.ADMIN.value,
                    api_keys.c.revoked_at.is_(None),
                    or_(api_keys.c.expires_at.is_(None), api_keys.c.expires_at > now),
                )
            ).scalar_one()
            check_revocation(
                key,
                other_live_admins=other_live_admins,
                tenant_is_system=bool(is_system),
                by_outside_admin=by_outside_admin,
                now=now,
            )
            connection.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
        self._forget(key_id)
        return key.model_copy(update={"revoked_at": now})
