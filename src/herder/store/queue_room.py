"""A tenant's room under ``max_queued`` (``domain.queue_room``), read inside a unit of work
that makes runs for it — a workflow run moving on, a backfill's step, a firer — and its held
runs released as room frees: by the unit of work that ends a workflow's or backfill's run,
and by the reaper's pass (polling guarantees progress, whatever freed the room).

Only one transaction at a time takes room for a tenant: it holds the tenant's row (``FOR NO
KEY UPDATE``, which a run's insert, taking ``KEY SHARE`` for its foreign key, never waits on).
Another that finds the row held takes none (``SKIP LOCKED``): it never waits, so no lock order
can deadlock, and its runs are held until the next release.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from herder.domain.queue_room import UNLIMITED, QueueRoom, release
from herder.domain.states import RunState
from herder.store.history.live import live_floor
from herder.store.schema import runs, tenants
from herder.store.unit import Work

RELEASED_PER_PASS = 500  # held runs one reaper pass queues, whatever the tenants


@dataclass(frozen=True)
class ReadQuotas:
    """A tenant's quotas as the caller read them, with a row of its own in one statement
    (``workflows.progress.lock``), so the room's first read is not made again."""

    quotas: Mapping[str, Any] | None


def queue_room(work: Work, tenant_id: str, read: ReadQuotas | None = None) -> QueueRoom:
    """The tenant's room now, taken for this transaction (see the module's docstring)."""
    known = None if read is None else {tenant_id: read.quotas}
    return queue_rooms(work, [tenant_id], known=known)[tenant_id]


def queue_rooms(
    work: Work,
    tenant_ids: Collection[str],
    *,
    wait: bool = False,
    known: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> dict[str, QueueRoom]:
    """Each tenant's room. ``wait``: for a row another transaction holds rather than take no
    room — for the firer, whose fire past the room is skipped, not held (it holds no row
    that a holder, which never waits for a tenant's row, could wait on). ``known``: the
    tenants' quotas, read by the caller (else read here)."""
    connection = work.connection
    rooms = dict.fromkeys(tenant_ids, UNLIMITED)
    if known is None:
        read = select(tenants.c.id, tenants.c.quotas).where(tenants.c.id.in_(list(tenant_ids)))
        known = {tenant_id: quotas for tenant_id, quotas in connection.execute(read)}
    bounds = {
        tenant_id: quotas["max_queued"]
        for tenant_id, quotas in known.items()
        if quotas and quotas.get("max_queued") is not None
    }
    if not bounds:
        return rooms
    held = set(
        connection.execute(
            select(tenants.c.id)
            .where(tenants.c.id.in_(sorted(bounds)))
            .order_by(tenants.c.id)
            .with_for_update(key_share=True, skip_locked=not wait)
        ).scalars()
    )
    queued: dict[str, int] = {
        tenant_id: count
        for tenant_id, count in connection.execute(
            select(runs.c.tenant_id, func.count())
            .where(
                runs.c.tenant_id.in_(sorted(bounds)),
                runs.c.state == RunState.QUEUED,
                runs.c.id >= live_floor(connection, work.now),
            )
            .group_by(runs.c.tenant_id)
        )
    }
    for tenant_id, bound in bounds.items():
        rooms[tenant_id] = QueueRoom(bound, queued.get(tenant_id, 0), busy=tenant_id not in held)
    return rooms


def release_held(
    work: Work, tenant_id: str, *, actor: str, read: ReadQuotas | None = None
) -> QueueRoom:
    """Release the tenant's held runs, oldest first, as many as its room takes (a write:
    they are queued); the room left for new runs. A tenant without ``max_queued`` has
    nothing held but what was held before its bound was lifted: the reaper's pass releases
    that."""
    room = queue_room(work, tenant_id, read)
    if room.max_queued is None:
        return room
    return room.taken(_release(work, tenant_id, room, actor, RELEASED_PER_PASS))


def release_all_held(work: Work, *, actor: str) -> bool:
    """The reaper's pass: every tenant's held runs that its room takes, up to a bound per
    pass; whether the bound stopped it (more may be waiting)."""
    tenant_ids = work.connection.execute(
        select(runs.c.tenant_id)
        .where(runs.c.state == RunState.PENDING, runs.c.id >= live_floor(work.connection, work.now))
        .group_by(runs.c.tenant_id)
    ).scalars()
    left = RELEASED_PER_PASS
    for tenant_id in sorted(tenant_ids):
        if left == 0:
            return True
        left -= _release(work, tenant_id, queue_room(work, tenant_id), actor, left)
    return left == 0


def _release(work: Work, tenant_id: str, room: QueueRoom, actor: str, limit: int) -> int:
    free = room.free
    wanted = limit if free is None else min(free, limit)
    if wanted == 0:
        return 0
    held = work.connection.execute(
        select(runs.c.id)
        .where(
            runs.c.tenant_id == tenant_id,
            runs.c.state == RunState.PENDING,
            runs.c.id >= live_floor(work.connection, work.now),
        )
        .order_by(runs.c.id)
        .limit(wanted)
        .with_for_update(key_share=True, skip_locked=True)
    ).scalars()
    return len(work.apply(release(list(held), room, work.now, actor=actor)).moved)
