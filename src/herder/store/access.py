"""Tenants (with their weights and quotas), API keys, worker tokens and the secrets of
registered workers. Secrets are shown once and stored only as hashes. Listing and revoking
keys is in ``herder.store.keys``."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exc, func, insert, or_, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, NotFound, Unauthorized
from herder.domain.ids import new_id
from herder.domain.keys import ApiToken, parse_api_token, refusal
from herder.domain.listings import PageRequest
from herder.domain.models import ApiKey, Page, Principal, Role, Tenant
from herder.domain.tenants import TenantQuotas, stored_quotas
from herder.store.database import Database
from herder.store.pagination import page_of
from herder.store.pools import check_usable
from herder.store.schema import api_keys, tenants, worker_tokens, workers


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _split_token(token: str) -> tuple[str, str]:
    """A worker token's id and secret."""
    identifier, _, secret = token.partition(".")
    if not identifier or not secret:
        raise Unauthorized("malformed key: expected '<id>.<secret>' as given when it was created")
    return identifier, secret


def _api_token(token: str) -> ApiToken:
    parsed = parse_api_token(token)
    if parsed is None:
        raise Unauthorized(
            "malformed key: expected '<tenant>.<id>.<secret>' as given when it was created"
        )
    return parsed


LAST_USE_GRANULARITY = timedelta(minutes=1)  # a key's last use is written at most this often
UNKNOWN_KEY = "unknown or revoked API key"


@dataclass(frozen=True)
class Bootstrap:
    """What a first start creates: shown to the operator once, never stored in clear."""

    tenant: Tenant
    admin_key: str
    worker_token: str


class _RecentlyChecked:
    """Tokens verified in the last few seconds, so that each request need not read the
    store to authenticate. A revoked key stops working within ``TTL_SECONDS``."""

    TTL_SECONDS = 5.0
    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, object]] = {}

    def get(self, token: str) -> object | None:
        entry = self._entries.get(token)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, token: str, value: object) -> None:
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[token] = (time.monotonic() + self.TTL_SECONDS, value)

    def forget(self, matches: Callable[[object], bool]) -> None:
        for token in [token for token, (_, value) in self._entries.items() if matches(value)]:
            self._entries.pop(token, None)


@dataclass(frozen=True)
class _AdmittedKey:
    """A verified key in the recent-keys cache: it stops admitting at its expiry, not at the
    end of the cache's time to live."""

    principal: Principal
    expires_at: datetime | None


class AccessRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        self._recent = _RecentlyChecked()
        self._recent_workers = _RecentlyChecked()  # (worker id, secret) pairs, apart

    def create_tenant(
        self,
        name: str,
        *,
        weight: int = 1,
        quotas: TenantQuotas | None = None,
        is_system: bool = False,
    ) -> Tenant:
        now = self._clock.now()
        tenant = Tenant(
            id=new_id("ten", epoch_ms(now)),
            name=name,
            weight=weight,
            is_system=is_system,
            created_at=now,
            quotas=quotas or TenantQuotas(),
        )
        with self._db.write() as connection:
            try:
                connection.execute(
                    insert(tenants).values(
                        **tenant.model_dump(exclude={"quotas"}),
                        quotas=stored_quotas(tenant.quotas),
                    )
                )
            except exc.IntegrityError as error:  # before the store's generic wrapping
                raise Conflict(f"a tenant named {name!r} already exists", field="name") from error
        return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        with self._db.read() as connection:
            row = (
                connection.execute(select(tenants).where(tenants.c.id == tenant_id))
                .mappings()
                .first()
            )
        if row is None:
            raise NotFound(f"tenant {tenant_id} not found")
        return Tenant.model_validate(dict(row))

    def tenant_quotas(self, tenant_id: str) -> TenantQuotas:
        with self._db.read() as connection:
            quotas = connection.execute(
                select(tenants.c.quotas).where(tenants.c.id == tenant_id)
            ).scalar()
        if quotas is None:
            raise NotFound(f"tenant {tenant_id} not found")
        return TenantQuotas.model_validate(quotas)

    def list_tenants(self, *, page: PageRequest = PageRequest()) -> Page[Tenant]:
        query = select(tenants)
        with self._db.read() as connection:
            return page_of(connection, query, tenants.c.id, _tenant, page)

    def update_tenant(
        self,
        tenant_id: str,
        *,
        weight: int | None = None,
        quota_changes: Mapping[str, object] | None = None,
        retention_days: int | None = None,
    ) -> Tenant:
        """Change the weight and some quotas: each given quota replaces the stored one, and
        ``None`` clears it (unlimited, ``max_checkpoint_mb`` too). The row is locked while
        the quotas are merged, so two concurrent changes to different quotas both take
        effect: ``FOR NO KEY UPDATE``, as the update itself takes, so a pool's shares naming
        the tenant (a key share) are not held back by it while their pool's edit holds the
        placement settings' version, which this update moves next (migration 0032)."""
        with self._db.write() as connection:
            row = (
                connection.execute(
                    select(tenants).where(tenants.c.id == tenant_id).with_for_update(key_share=True)
                )
                .mappings()
                .first()
            )
            if row is None:
                raise NotFound(f"tenant {tenant_id} not found")
            current = Tenant.model_validate(dict(row))
            quotas = TenantQuotas.model_validate(
                {**current.quotas.model_dump(), **(quota_changes or {})}
            )
            changed = current.model_copy(
                update={
                    "weight": current.weight if weight is None else weight,
                    "quotas": quotas,
                    "retention_days": retention_days or current.retention_days,
                }
            )
            connection.execute(
                update(tenants)
                .where(tenants.c.id == tenant_id)
                .values(
                    weight=changed.weight,
                    quotas=stored_quotas(quotas),
                    retention_days=changed.retention_days,
                )
            )
        return changed

    def set_default_pool(self, tenant_id: str, pool: str | None) -> None:
        """Where the tenant's runs that name no pool go: a pool it has a share in (422
        naming ``default_pool`` otherwise), or None: the shared fleet."""
        with self._db.write() as connection:
            if pool is not None:
                check_usable(connection, tenant_id, {"default_pool": pool})
            written = connection.execute(
                update(tenants).where(tenants.c.id == tenant_id).values(default_pool=pool)
            ).rowcount
        if not written:
            raise NotFound(f"tenant {tenant_id} not found")

    def create_api_key(
        self, tenant_id: str, role: Role, name: str, *, expires_at: datetime | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``tenant_id``; the returned token is the only copy of its secret."""
        self.get_tenant(tenant_id)
        now = self._clock.now()
        key = ApiKey(
            id=new_id("key", epoch_ms(now)),
            tenant_id=tenant_id,
            name=name,
            role=role,
            created_at=now,
            expires_at=expires_at,
        )
        secret = secrets.token_urlsafe(32)
        with self._db.write() as connection:
            connection.execute(
                insert(api_keys).values(**key.model_dump(), secret_hash=hash_secret(secret))
            )
        return key, str(ApiToken(tenant_id, key.id, secret))

    def recent_principal(self, token: str) -> Principal | None:
        """The caller, if this key was verified in the last few seconds and has not expired
        since (no store access)."""
        cached = self._recent.get(token)
        if not isinstance(cached, _AdmittedKey):
            return None
        if cached.expires_at is not None and cached.expires_at <= self._clock.now():
            return None  # the store says why
        return cached.principal

    def forget_key(self, key_id: str) -> None:
        """Stop admitting ``key_id`` from this process's cache (it was just revoked)."""
        self._recent.forget(
            lambda value: isinstance(value, _AdmittedKey) and value.principal.key_id == key_id
        )

    def forget_tenant(self, tenant_id: str) -> None:
        """Stop admitting ``tenant_id``'s keys from this process's cache (it is moving)."""
        self._recent.forget(
            lambda value: isinstance(value, _AdmittedKey) and value.principal.tenant_id == tenant_id
        )

    def recent_worker_token(self, token: str) -> str | None:
        cached = self._recent.get(token)
        return cached if isinstance(cached, str) else None

    def authenticate(self, token: str) -> Principal:
        if cached := self.recent_principal(token):
            return cached
        parsed = _api_token(token)
        key_id = parsed.key_id
        with self._db.read() as connection:
            row = connection.execute(
                select(api_keys, tenants.c.is_system, tenants.c.move_state, tenants.c.move_cell)
                .join(tenants, tenants.c.id == api_keys.c.tenant_id)
                .where(api_keys.c.id == key_id)
            ).first()
        if row is None or not hmac.compare_digest(row.secret_hash, hash_secret(parsed.secret)):
            raise Unauthorized(UNKNOWN_KEY)
        if parsed.tenant_id is not None and parsed.tenant_id != row.tenant_id:
            raise Unauthorized(UNKNOWN_KEY)  # a tenant part that is not the key's: as unknown
        key = ApiKey.model_validate(row._mapping)
        now = self._clock.now()
        if why := refusal(key, now):  # said only to whoever holds the secret
            raise Unauthorized(why)
        if key.last_used_at is None or key.last_used_at <= now - LAST_USE_GRANULARITY:
            self._note_use(key_id, now)
        principal = Principal(
            tenant_id=key.tenant_id,
            role=key.role,
            key_id=key_id,
            is_system=row.is_system,
            key_name=key.name,
            move_state=row.move_state,
            move_cell=row.move_cell,
        )
        self._recent.put(token, _AdmittedKey(principal, key.expires_at))
        return principal

    def _note_use(self, key_id: str, now: datetime) -> None:
        """One write a minute per key at most, whichever process gets there first."""
        stale = now - LAST_USE_GRANULARITY
        with self._db.write() as connection:
            connection.execute(
                update(api_keys)
                .where(
                    api_keys.c.id == key_id,
                    or_(api_keys.c.last_used_at.is_(None), api_keys.c.last_used_at <= stale),
                )
                .values(last_used_at=now)
            )

    def create_worker_token(self, name: str) -> str:
        now = self._clock.now()
        token_id = new_id("wtk", epoch_ms(now))
        secret = secrets.token_urlsafe(32)
        with self._db.write() as connection:
            connection.execute(
                insert(worker_tokens).values(
                    id=token_id, name=name, secret_hash=hash_secret(secret), created_at=now
                )
            )
        return f"{token_id}.{secret}"

    def authenticate_worker_token(self, token: str) -> str:
        """The token's id, when the token is a live worker token."""
        if cached := self.recent_worker_token(token):
            return cached
        token_id, secret = _split_token(token)
        with self._db.read() as connection:
            stored = connection.execute(
                select(worker_tokens.c.secret_hash).where(
                    worker_tokens.c.id == token_id, worker_tokens.c.revoked_at.is_(None)
                )
            ).scalar()
        if stored is None or not hmac.compare_digest(stored, hash_secret(secret)):
            raise Unauthorized("unknown or revoked worker token")
        self._recent.put(token, token_id)
        return token_id

    def recently_admitted(self, worker_id: str, secret: str) -> bool:
        """True if this worker's secret was verified in the last few seconds (no store access)."""
        return self._recent_workers.get(secret) == worker_id

    def authenticate_worker(self, worker_id: str, secret: str) -> None:
        """Admit a call for ``worker_id`` only with the secret it was given at registration,
        while the worker token it registered with is live. The fleet token, or another
        worker's secret, is refused: a job that saw the fleet token cannot act as a worker
        that is already registered."""
        if self.recently_admitted(worker_id, secret):
            return
        with self._db.read() as connection:
            stored = connection.execute(
                select(workers.c.secret_hash)
                .join(worker_tokens, worker_tokens.c.id == workers.c.token_id)
                .where(workers.c.id == worker_id, worker_tokens.c.revoked_at.is_(None))
            ).scalar()
        if stored is None or not hmac.compare_digest(stored, hash_secret(secret)):
            raise Unauthorized(
                f"unknown worker {worker_id} or not its secret: every call for a registered "
                "worker needs 'Authorization: Bearer <the worker_secret given at registration>'"
            )
        self._recent_workers.put(secret, worker_id)

    def bootstrap(self) -> Bootstrap | None:
        """On a store with no tenant: the system tenant, its admin key and a worker token."""
        with self._db.read() as connection:
            if connection.execute(select(func.count()).select_from(tenants)).scalar():
                return None
        try:
            tenant = self.create_tenant("default", is_system=True)
        except Conflict:
            return None  # another process bootstrapped first
        _, admin_key = self.create_api_key(tenant.id, Role.ADMIN, "bootstrap admin")
        return Bootstrap(tenant, admin_key, self.create_worker_token("bootstrap"))


def _tenant(row: Any) -> Tenant:
    return Tenant.model_validate(dict(row._mapping))
