"""The queue as users see it: queued runs in dispatch order, with why each still waits.

Dispatch order is the claim's (priority DESC, queued_at), and within a priority a limit's
keys take turns as placement has them (``domain.placement.limits.turns``): by how many of
the run's busiest key are running or queued ahead of it, then by its keys' last start. The
run id breaks ties so that pages never skip or repeat a run. The cursor is therefore a
position in that order, not an id as in the newest-first listings.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Subquery,
    and_,
    false,
    func,
    literal,
    or_,
    select,
)

from herder.clock import Clock
from herder.domain.errors import Invalid
from herder.domain.jobs import Capacity, Priority
from herder.domain.listings import PageRequest
from herder.domain.models import Page, QueueEntry
from herder.domain.placement.limits import FIRST_TURN, NEVER, Turn
from herder.domain.placement.ordering import wait_began
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.pagination import check_limit, page_records
from herder.store.schema import limit_last_starts, limits, run_limit_keys, runs, tenants
from herder.store.types import UtcDateTime

_PRIORITY_BY_RANK = {priority.rank: priority for priority in Priority}


def encode_position(priority: int, turn: Turn, queued_at: datetime, run_id: str) -> str:
    raw = "|".join(
        (str(priority), str(turn.taken), turn.last_start.isoformat(), queued_at.isoformat(), run_id)
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_position(cursor: str) -> tuple[int, Turn, datetime, str]:
    refused = Invalid("cursor is not one returned by this listing", field="cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        priority, taken, last_start, queued_at, run_id = raw.split("|")
        turn = Turn(int(taken), datetime.fromisoformat(last_start))
        position = int(priority), turn, datetime.fromisoformat(queued_at), run_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refused from None
    moments = (turn.last_start, position[2])
    if any(moment.tzinfo is None for moment in moments) or not run_id.startswith("run_"):
        raise refused
    return position


def _after(
    cursor: str, order: list[tuple[ColumnElement[Any], bool]], turned: bool
) -> ColumnElement[bool]:
    """Past the cursor's position in ``order`` (each expression and whether it descends;
    ``turned``: with the turn's two between the priority and the time queued)."""
    priority, turn, queued_at, run_id = decode_position(cursor)
    values = (priority, *((turn.taken, turn.last_start) if turned else ()), queued_at, run_id)
    past: ColumnElement[bool] = false()
    for (column, descending), value in reversed(list(zip(order, values, strict=True))):
        beyond = column < value if descending else column > value
        past = or_(beyond, and_(column == value, past))
    return past


def _turns(tenant_id: str | None, floor: str) -> Subquery:
    """Each queued limited run's turn, as placement works it out (``limits.turns``): for
    its busiest key, the key's running runs plus its queued runs ahead of it; the latest of
    its keys' last starts. The keys of a deleted limit went with it."""
    keyed = run_limit_keys
    of_key = (keyed.c.limit_id, keyed.c.key)
    ahead = func.row_number().over(
        partition_by=of_key, order_by=(runs.c.priority.desc(), runs.c.queued_at, runs.c.id)
    )

    def keys_of(state: RunState) -> list[ColumnElement[bool]]:
        mine = [] if tenant_id is None else [runs.c.tenant_id == tenant_id]
        return [runs.c.id == keyed.c.run_id, runs.c.state == state, runs.c.id >= floor, *mine]

    waiting = (
        select(keyed.c.run_id, *of_key, (ahead - 1).label("ahead"))
        .where(*keys_of(RunState.QUEUED))
        .subquery()
    )
    busy = (
        select(*of_key, func.count().label("running"))
        .where(*keys_of(RunState.RUNNING))
        .group_by(*of_key)
        .subquery()
    )
    last = limit_last_starts
    return (
        select(
            waiting.c.run_id,
            func.max(waiting.c.ahead + func.coalesce(busy.c.running, 0)).label("taken"),
            func.max(last.c.started_at).label("last_start"),
        )
        .select_from(
            waiting.outerjoin(
                busy, and_(busy.c.limit_id == waiting.c.limit_id, busy.c.key == waiting.c.key)
            ).outerjoin(
                last, and_(last.c.limit_id == waiting.c.limit_id, last.c.key == waiting.c.key)
            )
        )
        .group_by(waiting.c.run_id)
        .subquery("turns")
    )


def _has_limits(connection: Connection, tenant_id: str | None) -> bool:
    """Whether the tenant (None: any tenant) has a limit: only then do keys take turns."""
    query = select(limits.c.id).limit(1)
    if tenant_id is not None:
        query = query.where(limits.c.tenant_id == tenant_id)
    return connection.execute(query).first() is not None


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
        page: PageRequest = PageRequest(),
    ) -> Page[QueueEntry]:
        """Queued runs of one tenant (``None``: of every tenant), in dispatch order; of one
        job, or counted against one limit (and key), if asked."""
        check_limit(page.limit)
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
        now = self._clock.now()
        with self._db.read() as connection:
            floor = live_floor(connection, now)
            query = query.where(runs.c.id >= floor)
            turned = _has_limits(connection, tenant_id)
            by_turn: list[tuple[ColumnElement[Any], bool]] = []
            if turned:
                turns = _turns(tenant_id, floor)
                taken = func.coalesce(turns.c.taken, 0)
                last_start = func.coalesce(turns.c.last_start, literal(NEVER, UtcDateTime()))
                query = query.outerjoin(turns, turns.c.run_id == runs.c.id).add_columns(
                    taken.label("taken"), last_start.label("last_start")
                )
                by_turn = [(taken, False), (last_start, False)]
            order = [
                (runs.c.priority, True), *by_turn, (runs.c.queued_at, False), (runs.c.id, False)
            ]  # fmt: skip
            if page.cursor:  # empty: the first page
                query = query.where(_after(page.cursor, order, turned))
            query = query.order_by(*(column.desc() if down else column for column, down in order))
            rows = connection.execute(query.limit(page.limit + 1)).all()
        more = len(rows) > page.limit
        rows = rows[: page.limit]
        last = rows[-1] if more else None
        return Page(
            items=page_records(rows, lambda row: _entry(row, now)),
            next_cursor=_position(last, turned) if last else None,
        )


def _position(row: Any, turned: bool) -> str:
    turn = Turn(row.taken, row.last_start) if turned else FIRST_TURN
    return encode_position(row.priority, turn, row.queued_at, row.id)


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
