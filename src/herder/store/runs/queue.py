"""The queue as users see it: queued runs in dispatch order, with why each still waits.

Dispatch order is the claim's (priority DESC, queued_at), with the run id breaking ties so
that pages never skip or repeat a run. The cursor is therefore a position in that order, not
an id as in the newest-first listings.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select

from herder.clock import Clock
from herder.domain.errors import Invalid
from herder.domain.jobs import Capacity, Priority
from herder.domain.models import Page, QueueEntry
from herder.domain.placement.ordering import wait_began
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.pagination import check_limit, page_records
from herder.store.schema import run_limit_keys, runs, tenants

_PRIORITY_BY_RANK = {priority.rank: priority for priority in Priority}


def encode_position(priority: int, queued_at: datetime, run_id: str) -> str:
    raw = f"{priority}|{queued_at.isoformat()}|{run_id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_position(cursor: str) -> tuple[int, datetime, str]:
    refused = Invalid("cursor is not one returned by this listing", field="cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        priority, queued_at, run_id = raw.split("|")
        position = int(priority), datetime.fromisoformat(queued_at), run_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refused from None
    if position[1].tzinfo is None or not run_id.startswith("run_"):
        raise refused
    return position


def _after(cursor: str) -> Any:
    priority, queued_at, run_id = decode_position(cursor)
    return or_(
        runs.c.priority < priority,
        and_(runs.c.priority == priority, runs.c.queued_at > queued_at),
        and_(runs.c.priority == priority, runs.c.queued_at == queued_at, runs.c.id > run_id),
    )


class QueueRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def list(
        self,
        tenant_id: str | None,
        *,
        job_id: str | None = None,
        limit_id: str | None = None,
        key: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[QueueEntry]:
        """Queued runs of one tenant (``None``: of every tenant), in dispatch order; of one
        job, or counted against one limit (and key), if asked."""
        check_limit(limit)
        query = (
            select(
                runs.c.id,
                runs.c.tenant_id,
                tenants.c.name.label("tenant_name"),
                runs.c.job_id,
                runs.c.job_name,
                runs.c.priority,
                runs.c.cpu_milli,
                runs.c.memory_mb,
                runs.c.gpus,
                runs.c.replicas,
                runs.c.requires,
                runs.c.queued_at,
                runs.c.preempted_at,
                runs.c.waiting_reason,
            )
            .join(tenants, tenants.c.id == runs.c.tenant_id)
            .where(runs.c.state == RunState.QUEUED)
        )
        if tenant_id is not None:
            query = query.where(runs.c.tenant_id == tenant_id)
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        if limit_id is not None:
            keyed = select(run_limit_keys.c.run_id).where(run_limit_keys.c.limit_id == limit_id)
            if key is not None:
                keyed = keyed.where(run_limit_keys.c.key == key)
            query = query.where(runs.c.id.in_(keyed))
        if cursor:  # empty: the first page
            query = query.where(_after(cursor))
        query = query.order_by(runs.c.priority.desc(), runs.c.queued_at, runs.c.id)
        now = self._clock.now()
        with self._db.read() as connection:
            query = query.where(runs.c.id >= live_floor(connection, now))
            rows = connection.execute(query.limit(limit + 1)).all()
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if more else None
        return Page(
            items=page_records(rows, lambda row: _entry(row, now)),
            next_cursor=encode_position(last.priority, last.queued_at, last.id) if last else None,
        )


def _entry(row: Any, now: datetime) -> QueueEntry:
    return QueueEntry(
        run_id=row.id,
        tenant_id=row.tenant_id,
        tenant_name=row.tenant_name,
        job_id=row.job_id,
        job_name=row.job_name,
        priority=_PRIORITY_BY_RANK[row.priority],
        resources=Capacity(cpu=row.cpu_milli / 1000, memory_mb=row.memory_mb, gpus=row.gpus),
        replicas=row.replicas,
        requires=row.requires or {},
        queued_at=row.queued_at,
        waited_seconds=round(
            max(0.0, (now - wait_began(row.queued_at, row.preempted_at)).total_seconds()), 3
        ),
        waiting_reason=row.waiting_reason,
    )
