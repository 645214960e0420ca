"""Resource pools and the tenants' shares of them (``domain.pools``, docs/pools.md).

A pool is found by its id or its name (names are lower case, ids are not, so the two never
meet). ``usable_pools`` is the check every submission that names a pool makes, in the
submission's own transaction; nothing is read when no pool is named.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.pools import (
    Pool,
    PoolChanges,
    PoolShare,
    PoolSpec,
    selector_of,
)
from herder.store.autoscaling import PoolScaling, pool_scaling
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.named import NamedRows
from herder.store.owned import MAX_SHOWN_CHARS
from herder.store.pool_members import live_members
from herder.store.pool_use import pool_use
from herder.store.schema import pool_shares, pools, tenants


def not_usable(name: str, tenant_id: str, field: str) -> Invalid:
    return Invalid(f"no pool named {name} that tenant {tenant_id} may use", field=field)


def usable_pools(connection: Connection, tenant_id: str, names: Collection[str]) -> set[str]:
    """Of ``names``, the pools ``tenant_id`` has a share in (one query; none when none)."""
    if not names:
        return set()
    rows = connection.execute(
        select(pools.c.name)
        .join(pool_shares, pool_shares.c.pool_id == pools.c.id)
        .where(pool_shares.c.tenant_id == tenant_id, pools.c.name.in_(set(names)))
    )
    return set(rows.scalars())


def check_usable(connection: Connection, tenant_id: str, named: Mapping[str, str | None]) -> None:
    """Every pool named (field → pool name; None names none) is one ``tenant_id`` may use,
    else ``Invalid`` naming the first field that names another."""
    wanted = {field: name for field, name in named.items() if name is not None}
    usable = usable_pools(connection, tenant_id, wanted.values())
    for field, name in wanted.items():
        if name not in usable:
            raise not_usable(name, tenant_id, field)


def _autoscaling(spec: PoolSpec) -> dict[str, Any] | None:
    return None if spec.autoscaling is None else spec.autoscaling.model_dump(mode="json")


def _share_rows(pool_id: str, shares: list[PoolShare]) -> list[dict[str, Any]]:
    return [
        {
            "pool_id": pool_id,
            "tenant_id": share.tenant_id,
            "cpu_milli": share.amount.cpu_milli,
            "memory_mb": share.memory_mb,
            "gpus": share.gpus,
        }
        for share in shares
    ]


class PoolRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def create(self, name: str, spec: PoolSpec) -> Pool:
        now = self._clock.now()
        pool_id = new_id("pool", epoch_ms(now))
        with self._db.write() as connection:
            _check_tenants(connection, spec.shares)
            columns = {
                "description": spec.description, "selector": spec.selector or {},
                "autoscaling": _autoscaling(spec),
            }  # fmt: skip
            ROWS.insert(connection, None, pool_id, name, columns, now)
            if spec.shares:
                connection.execute(insert(pool_shares), _share_rows(pool_id, spec.shares))
            return self._get(connection, pool_id)

    def get(self, pool: str, *, tenant_id: str | None = None) -> Pool:
        """The pool of this id or name; with ``tenant_id``, only if that tenant may use it."""
        with self._db.read() as connection:
            return self._get(connection, pool, tenant_id=tenant_id)

    def list(
        self, *, tenant_id: str | None = None, page: PageRequest = PageRequest()
    ) -> Page[Pool]:
        """Newest first: every pool, or (``tenant_id``) those that tenant may use."""
        with self._db.read() as connection:
            listed = ROWS.page(connection, None, page, where=_shared_with(tenant_id))
            found = _completed(connection, listed.items, self._clock.now())
            return listed.model_copy(update={"items": found})

    def usable(self, tenant_id: str) -> tuple[str, ...]:
        """The names of the pools ``tenant_id`` may use (it has a share in), sorted."""
        with self._db.read() as connection:
            rows = connection.execute(
                select(pools.c.name).where(*_shared_with(tenant_id)).order_by(pools.c.name)
            )
            return tuple(rows.scalars())

    def update(self, pool: str, changes: PoolChanges) -> Pool:
        """Each of ``description``, ``selector`` (None: the default) and ``shares`` (as a
        whole) given replaces the stored one."""
        given = changes.model_fields_set
        values: dict[str, object] = {}
        if "description" in given:
            values["description"] = changes.description
        if "selector" in given:
            values["selector"] = changes.selector or {}
        if "autoscaling" in given:
            values["autoscaling"] = _autoscaling(changes)
        with self._db.write() as connection:
            pool_id = ROWS.edit(connection, None, pool, lambda _: values, self._clock.now()).id
            if "shares" in given:
                _check_tenants(connection, changes.shares)
                connection.execute(delete(pool_shares).where(pool_shares.c.pool_id == pool_id))
                if changes.shares:
                    connection.execute(insert(pool_shares), _share_rows(pool_id, changes.shares))
            return self._get(connection, pool_id)

    def autoscaling(self, pool: str) -> PoolScaling:
        """The pool's autoscaling inputs and desired count (``store.autoscaling``)."""
        with self._db.read() as connection:
            return pool_scaling(connection, pool, self._clock.now())

    def delete(self, pool: str) -> None:
        """The pool and its shares go. Runs and jobs that name it keep naming it: queued
        runs wait (the dispatcher says why) and are placed again if a pool of that name is
        made."""
        with self._db.write() as connection:
            gone = ROWS.delete(connection, None, pool)
            connection.execute(delete(pool_shares).where(pool_shares.c.pool_id == gone.id))

    def _get(self, connection: Connection, pool: str, *, tenant_id: str | None = None) -> Pool:
        row = ROWS.row(connection, None, pool, where=_shared_with(tenant_id))
        [found] = _completed(connection, [_bare_pool(row)], self._clock.now())
        return found


def _shared_with(tenant_id: str | None) -> list[Any]:
    """Only the pools ``tenant_id`` has a share in; any pool for None."""
    if tenant_id is None:
        return []
    shared = select(pool_shares.c.pool_id).where(
        pool_shares.c.pool_id == pools.c.id, pool_shares.c.tenant_id == tenant_id
    )
    return [shared.exists()]


def _check_tenants(connection: Connection, shares: list[PoolShare]) -> None:
    """Every share names a tenant that exists (422 naming ``shares.i.tenant_id``)."""
    named = {share.tenant_id for share in shares}
    if not named:
        return
    found = set(connection.execute(select(tenants.c.id).where(tenants.c.id.in_(named))).scalars())
    for index, share in enumerate(shares):
        if share.tenant_id not in found:
            raise Invalid(
                f"tenant {share.tenant_id[:MAX_SHOWN_CHARS]} not found",
                field=f"shares.{index}.tenant_id",
            )


def _bare_pool(row: Any) -> Pool:
    """A pool as its row says, before its shares and workers are read."""
    return Pool(
        id=row.id,
        name=row.name,
        description=row.description,
        selector=selector_of(row.name, row.selector),
        shares=[],
        workers=0,
        autoscaling=row.autoscaling,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


ROWS = NamedRows(pools, "pool", _bare_pool, owned=False)


def _completed(connection: Connection, found: list[Pool], now: datetime) -> list[Pool]:
    """The pools with their shares, how many live workers each holds now and what each tenant
    runs on them. Which pool a worker is in depends on every pool's selector (the most
    specific wins), so all are read: pools are few, made by hand."""
    if not found:
        return []
    shares: dict[str, list[PoolShare]] = {pool.id: [] for pool in found}
    for row in connection.execute(
        select(pool_shares)
        .where(pool_shares.c.pool_id.in_(shares))
        .order_by(pool_shares.c.tenant_id)
    ):
        shares[row.pool_id].append(
            PoolShare(
                tenant_id=row.tenant_id,
                cpu=row.cpu_milli / 1000,
                memory_mb=row.memory_mb,
                gpus=row.gpus,
            )
        )
    members = live_members(connection)
    wanted = {pool.name: members.get(pool.name, {}) for pool in found}
    used = pool_use(connection, wanted, live_floor(connection, now))
    return [
        pool.model_copy(
            update={
                "shares": shares[pool.id],
                "workers": len(members.get(pool.name, {})),
                "in_use": used.get(pool.name, []),
            }
        )
        for pool in found
    ]
