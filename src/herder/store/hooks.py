"""A tenant's inbound webhooks (``domain.hooks``, docs/events.md) with their sealed signing
secrets, and the record of deliveries (never a body): every accepted one with the digest of
what it signed — unique per hook, so a replay cannot be accepted twice, however concurrent —
and the refused ones within their bounds, kept a day."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import NotFound, Unavailable
from herder.domain.events import EVENT_RETENTION_DAYS
from herder.domain.hooks import (
    REFUSED_RETENTION_HOURS,
    CreatedHook,
    Delivery,
    DeliveryStatus,
    Hook,
    HookRequest,
    HookSpec,
    Replayed,
    hook_address,
    parse_hook_address,
)
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.keyring import Keyring, KeyringError, Sealed, hook_associated_data
from herder.store.database import Database
from herder.store.dialect import insert_rows_ignoring_duplicates
from herder.store.named import NamedRows
from herder.store.owned import MAX_SHOWN_CHARS
from herder.store.pagination import page_of
from herder.store.schema import hook_deliveries, hooks
from herder.store.secrets import NO_KEY

PRUNED_PER_PASS = 5_000
MAX_REASON_CHARS = 512


def _hook(row: Any) -> Hook:
    spec = HookSpec.model_validate(row.spec)
    return Hook(
        id=row.id, name=row.name, scheme=spec.scheme, event=spec.event or row.name,
        rate_per_second=spec.rate_per_second, burst=spec.burst, enabled=spec.enabled,
        url=f"/v1/hooks/{hook_address(row.tenant_id, row.id)}", created_at=row.created_at,
        updated_at=row.updated_at, version=row.version,
    )  # fmt: skip


ROWS = NamedRows(hooks, "hook", _hook)


@dataclass(frozen=True)
class Receiver:
    """What a delivery is checked against: the hook, its tenant and its secret."""

    hook: Hook
    tenant_id: str
    secret: str


@dataclass(frozen=True)
class DeliveryRecord:
    hook_id: str
    tenant_id: str
    delivery_id: str | None
    signed_at: int | None
    status: DeliveryStatus
    http_status: int
    reason: str | None = None
    event_id: str | None = None
    signed_digest: str | None = None  # of a verified delivery: ``Verified.signed_digest``


def record_delivery(connection: Connection, record: DeliveryRecord, now: datetime) -> None:
    """Record it; an accepted (or duplicate) delivery whose signed digest the hook holds
    already is ``Replayed`` — raised inside the caller's transaction, undoing its event."""
    kept = record.status is not DeliveryStatus.REJECTED
    row = {
        "id": new_id("dlv", epoch_ms(now)), "hook_id": record.hook_id,
        "tenant_id": record.tenant_id, "delivery_id": record.delivery_id,
        "signed_at": record.signed_at, "status": record.status,
        "http_status": record.http_status, "event_id": record.event_id, "received_at": now,
        "reason": None if record.reason is None else record.reason[:MAX_REASON_CHARS],
        "signed_digest": record.signed_digest if kept else None,
    }  # fmt: skip
    if not insert_rows_ignoring_duplicates(
        connection, hook_deliveries, [row], hook_deliveries.c.id
    ):
        raise Replayed


def first_signed_at(connection: Connection, hook_id: str, delivery_id: str) -> int | None:
    """When the accepted delivery of this id was signed (``None``: the scheme signs no time)."""
    return connection.execute(
        select(hook_deliveries.c.signed_at).where(
            hook_deliveries.c.hook_id == hook_id,
            hook_deliveries.c.delivery_id == delivery_id,
            hook_deliveries.c.status == DeliveryStatus.ACCEPTED,
        )
    ).scalar()


def _new_secret() -> str:
    return f"whk_{secrets.token_urlsafe(32)}"


class HookRepository:
    def __init__(self, database: Database, clock: Clock, keyring: Keyring | None) -> None:
        self._db = database
        self._clock = clock
        self._keyring = keyring

    def create(self, tenant_id: str, request: HookRequest) -> CreatedHook:
        """The hook, with its secret (the one given, else a new one) shown this once."""
        now = self._clock.now()
        hook_id = new_id("hook", epoch_ms(now))
        secret = request.secret or _new_secret()
        spec = HookSpec.model_validate(request.model_dump(include=set(HookSpec.model_fields)))
        columns = {"spec": spec.model_dump(mode="json"), **self._sealed(tenant_id, hook_id, secret)}
        with self._db.write() as connection:
            hook = ROWS.insert(connection, tenant_id, hook_id, request.name, columns, now)
        return CreatedHook(**hook.model_dump(), secret=secret)

    def rotate(self, tenant_id: str, hook: str, secret: str | None) -> CreatedHook:
        """A new signing secret (the one given, else a new one), shown this once; the URL
        stays. Deliveries signed with the old one are refused from the commit on."""
        new = secret or _new_secret()
        with self._db.write() as connection:
            found = ROWS.edit(
                connection, tenant_id, hook,
                lambda row: self._sealed(row.tenant_id, row.id, new), self._clock.now(),
            )  # fmt: skip
        return CreatedHook(**found.model_dump(), secret=new)

    def _sealed(self, tenant_id: str, hook_id: str, secret: str) -> dict[str, Any]:
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        sealed = self._keyring.seal(secret.encode(), hook_associated_data(tenant_id, hook_id))
        return {"key_id": sealed.key_id, "nonce": sealed.nonce, "ciphertext": sealed.ciphertext}

    def get(self, tenant_id: str, hook: str) -> Hook:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, hook)

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[Hook]:
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page)

    def edit(
        self,
        tenant_id: str,
        hook: str,
        change: Callable[[HookSpec], HookSpec],
        *,
        if_version: frozenset[int] | None = None,
    ) -> Hook:
        def columns(row: Any) -> Mapping[str, Any]:
            return {"spec": change(HookSpec.model_validate(row.spec)).model_dump(mode="json")}

        with self._db.write() as connection:
            return ROWS.edit(
                connection, tenant_id, hook, columns, self._clock.now(), if_version=if_version
            )

    def delete(self, tenant_id: str, hook: str) -> None:
        with self._db.write() as connection:
            gone = ROWS.delete(connection, tenant_id, hook)
            connection.execute(delete(hook_deliveries).where(hook_deliveries.c.hook_id == gone.id))

    def receiver(self, hook_id: str) -> Receiver:
        """The hook a delivery names, whoever's it is (the signature decides), with its
        secret opened; ``NotFound`` for none."""
        tenant_id, plain_id = parse_hook_address(hook_id)
        with self._db.read() as connection:
            row = connection.execute(select(hooks).where(hooks.c.id == plain_id)).first()
        if row is None or (tenant_id is not None and tenant_id != row.tenant_id):
            raise NotFound(f"hook {hook_id[:MAX_SHOWN_CHARS]} not found")
        return Receiver(_hook(row), row.tenant_id, self._open(row))

    def _open(self, row: Any) -> str:
        """The hook's secret; ``Unavailable`` (503, never a 500) when this server's keyring
        cannot open it."""
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        sealed = Sealed(row.key_id, bytes(row.nonce), bytes(row.ciphertext))
        try:
            opened = self._keyring.open(sealed, hook_associated_data(row.tenant_id, row.id))
        except KeyringError as error:
            raise Unavailable(f"this hook's secret does not open here: {error}") from error
        return opened.decode()

    def key_ids_in_use(self) -> set[str]:
        with self._db.read() as connection:
            return set(connection.execute(select(hooks.c.key_id).distinct()).scalars())

    def reencrypt(self, batch: int = 500) -> int:
        """Seal every hook's secret not sealed with the current key again with it (after a
        key rotation, so the old key can be dropped); how many were."""
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        current = self._keyring.current_key_id
        done = 0
        while True:
            with self._db.write() as connection:
                rows = connection.execute(
                    select(hooks).where(hooks.c.key_id != current).limit(batch).with_for_update()
                ).all()
                for row in rows:
                    connection.execute(
                        update(hooks)
                        .where(hooks.c.id == row.id)
                        .values(**self._sealed(row.tenant_id, row.id, self._open(row)))
                    )
            done += len(rows)
            if len(rows) < batch:
                return done

    def record(self, record: DeliveryRecord) -> None:
        """A delivery refused before it became an event."""
        with self._db.write() as connection:
            record_delivery(connection, record, self._clock.now())

    def seen(self, hook_id: str, signed_digest: str) -> bool:
        """Whether the hook accepted a delivery that signed this before: a replay, refused
        before it is charged (the unique key, not this read, is what keeps it out)."""
        with self._db.read() as connection:
            found = connection.execute(
                select(hook_deliveries.c.id).where(
                    hook_deliveries.c.hook_id == hook_id,
                    hook_deliveries.c.signed_digest == signed_digest,
                )
            ).first()
        return found is not None

    def deliveries(self, tenant_id: str, hook: str, page: PageRequest) -> Page[Delivery]:
        with self._db.read() as connection:
            found = ROWS.row(connection, tenant_id, hook)
            query = select(hook_deliveries).where(hook_deliveries.c.hook_id == found.id)
            return page_of(
                connection,
                query,
                hook_deliveries.c.id,
                lambda row: Delivery.model_validate(dict(row._mapping)),
                page,
            )

    def prune(self) -> bool:
        """As ``EventRepository.prune``, for deliveries: refused ones go after
        ``REFUSED_RETENTION_HOURS``, the others (each a replay's unique key) with events."""
        now = self._clock.now()
        refused = (hook_deliveries.c.status == DeliveryStatus.REJECTED) & (
            hook_deliveries.c.received_at < now - timedelta(hours=REFUSED_RETENTION_HOURS)
        )
        expired = hook_deliveries.c.received_at < now - timedelta(days=EVENT_RETENTION_DAYS)
        more = False
        for doomed in (refused, expired):
            with self._db.write() as connection:
                chosen = select(hook_deliveries.c.id).where(doomed).limit(PRUNED_PER_PASS)
                gone = connection.execute(
                    delete(hook_deliveries).where(hook_deliveries.c.id.in_(chosen))
                ).rowcount
            more = more or gone == PRUNED_PER_PASS
        return more
