"""A tenant's named limits (``domain.limits``, docs/flow-control.md) and the keys their runs
count against.

A limit is found by its id or its name (names are lower case, ids are not, so the two never
meet). A limit that a job, schedule or workflow names is not deleted (409 naming them): their
runs would render keys of a limit that no longer exists.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    String,
    case,
    cast,
    delete,
    func,
    select,
)

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import NewRun
from herder.domain.limits import Limit, LimitKeyUsage, LimitReference, LimitSpec
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.states import SLOT_HOLDING_RUN_STATES, RunState
from herder.store.database import Database
from herder.store.dialect import insert_rows
from herder.store.named import NamedRows
from herder.store.pagination import check_limit
from herder.store.schema import (
    jobs,
    limit_last_starts,
    limits,
    run_limit_keys,
    runs,
    schedules,
    workflows,
)

# A key's active runs: those holding a slot (not ended, not suspended; a delayed run too).
COUNTED_STATES = sorted(str(state) for state in SLOT_HOLDING_RUN_STATES)
MAX_REFERRERS_SHOWN = 10  # in a refused delete's message


def _limit(row: Any) -> Limit:
    return Limit.model_validate(
        {
            **row.spec,
            "id": row.id,
            "name": row.name,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "version": row.version,
        }
    )


def _spec(spec: LimitSpec) -> dict[str, Any]:
    """What the row keeps: the spec's own fields (a ``Limit`` carries its id and times too)."""
    return spec.model_dump(mode="json", include=set(LimitSpec.model_fields), exclude_none=True)


def _names_limit(references: object, name: str) -> bool:
    return isinstance(references, list) and any(
        isinstance(reference, dict) and reference.get("limit") == name for reference in references
    )


def _workflow_names_limit(spec: dict[str, Any], name: str) -> bool:
    return any(_names_limit(task.get("limits"), name) for task in spec.get("tasks", []))


def referrers(connection: Connection, tenant_id: str, name: str) -> list[str]:
    """The jobs, schedules and workflows of ``tenant_id`` that name the limit ``name``, as
    ``job train``, ``schedule nightly``…; a textual filter first, the specs then decide."""
    mentioned = f'%"{name}"%'
    found: list[str] = []
    kinds: Iterable[tuple[str, Any, Callable[[dict[str, Any], str], bool]]] = (
        ("job", jobs, lambda spec, name: _names_limit(spec.get("limits"), name)),
        ("schedule", schedules, lambda spec, name: _names_limit(spec.get("limits"), name)),
        ("workflow", workflows, _workflow_names_limit),
    )
    for noun, table, names in kinds:
        rows = connection.execute(
            select(table.c.id, table.c.name, table.c.spec).where(
                table.c.tenant_id == tenant_id, cast(table.c.spec, String).like(mentioned)
            )
        )
        found += [f"{noun} {row.name or row.id}" for row in rows if names(row.spec, name)]
    return sorted(found)


def named_limits(
    connection: Connection, tenant_id: str, names: Iterable[str]
) -> dict[str, tuple[str, LimitSpec]]:
    """Of ``names``, the tenant's limits: name → (id, spec); one query, none when none."""
    wanted = set(names)
    if not wanted:
        return {}
    rows = connection.execute(
        select(limits.c.id, limits.c.name, limits.c.spec).where(
            limits.c.tenant_id == tenant_id, limits.c.name.in_(wanted)
        )
    )
    return {row.name: (row.id, LimitSpec.model_validate(row.spec)) for row in rows}


def check_references(
    connection: Connection, tenant_id: str, references: Iterable[tuple[str, LimitReference]]
) -> None:
    """Every limit named (``field`` prefix such as ``limits.0`` → reference) is one of the
    tenant's, else ``Invalid`` naming the first ``….limit`` that names another: a template
    can reach no other tenant's limit."""
    named = list(references)
    found = named_limits(connection, tenant_id, (reference.limit for _, reference in named))
    for field, reference in named:
        if reference.limit not in found:
            raise Invalid(
                f"no limit named {reference.limit}; create it with POST /v1/limits first",
                field=f"{field}.limit",
            )


def run_keys(
    connection: Connection, new_runs: Sequence[NewRun]
) -> dict[str, builtins.list[builtins.list[str]]]:
    """Each new run's ``[[limit_id, key], ...]`` (sorted by limit id) from the rendered keys
    its spec carries, the limits' ids read in one query for the whole batch; a limit deleted
    meanwhile counts nothing."""
    named = [new for new in new_runs if new.spec.limits]
    if not named:
        return {}
    rows = connection.execute(
        select(limits.c.id, limits.c.tenant_id, limits.c.name).where(
            limits.c.tenant_id.in_({new.tenant_id for new in named}),
            limits.c.name.in_({ref.limit for new in named for ref in new.spec.limits}),
        )
    )
    ids = {(row.tenant_id, row.name): row.id for row in rows}
    found = {}
    for new in named:
        pairs = sorted(
            [ids[new.tenant_id, ref.limit], ref.key]
            for ref in new.spec.limits
            if (new.tenant_id, ref.limit) in ids
        )
        if pairs:
            found[new.id] = pairs
    return found


def record_run_keys(
    connection: Connection,
    new_runs: Sequence[NewRun],
    keys: Mapping[str, Sequence[Sequence[str]]],
    inserted: Collection[str],
) -> None:
    """The ``run_limit_keys`` rows of the runs inserted, for counting a key's runs."""
    tenants = {new.id: new.tenant_id for new in new_runs}
    rows = [
        {"run_id": run_id, "limit_id": limit_id, "tenant_id": tenants[run_id], "key": key}
        for run_id, pairs in keys.items()
        if run_id in inserted
        for limit_id, key in pairs
    ]
    insert_rows(connection, run_limit_keys, rows)


ROWS = NamedRows(limits, "limit", _limit)


class LimitRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def create(self, tenant_id: str, name: str, spec: LimitSpec) -> Limit:
        now = self._clock.now()
        with self._db.write() as connection:
            limit_id = new_id("lim", epoch_ms(now))
            return ROWS.insert(connection, tenant_id, limit_id, name, {"spec": _spec(spec)}, now)

    def get(self, tenant_id: str, limit: str) -> Limit:
        """The tenant's limit of this id or name; another tenant's is not found."""
        with self._db.read() as connection:
            return self._get(connection, tenant_id, limit)

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[Limit]:
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page)

    def edit(
        self,
        tenant_id: str,
        limit: str,
        change: Callable[[Limit], LimitSpec],
        *,
        if_version: frozenset[int] | None = None,
    ) -> Limit:
        """Read, decide and write in one transaction, the row held; the version goes up by
        one. With ``if_version``, only if the limit is still at one of those versions."""
        with self._db.write() as connection:
            return ROWS.edit(
                connection, tenant_id, limit,
                lambda row: {"spec": _spec(change(_limit(row)))}, self._clock.now(),
                if_version=if_version,
            )  # fmt: skip

    def delete(self, tenant_id: str, limit: str) -> None:
        """Refused (409 naming them) while jobs, schedules or workflows name it. Runs that
        counted against it keep their ``limit_keys``; their key rows and its keys' last
        starts go with it."""
        with self._db.write() as connection:
            current = self._get(connection, tenant_id, limit, for_update=True)
            using = referrers(connection, tenant_id, current.name)
            if using:
                shown = ", ".join(using[:MAX_REFERRERS_SHOWN])
                more = len(using) - MAX_REFERRERS_SHOWN
                raise Conflict(
                    f"limit {current.name!r} is named by {shown}"
                    + (f" and {more} more" if more > 0 else "")
                    + "; change them before deleting it"
                )
            for table in (run_limit_keys, limit_last_starts):
                connection.execute(delete(table).where(table.c.limit_id == current.id))
            connection.execute(delete(limits).where(limits.c.id == current.id))

    def keys(self, tenant_id: str, limit: str, *, count: int = 100) -> builtins.list[LimitKeyUsage]:
        """The limit's keys with active runs, busiest first (then by key), at most ``count``."""
        check_limit(count)

        def counted(*states: str) -> Any:
            return func.sum(case((runs.c.state.in_(states), 1), else_=0))

        running = counted(RunState.RUNNING.value)
        scheduled = counted(RunState.SCHEDULED.value)
        total = func.count()
        with self._db.read() as connection:
            found = self._get(connection, tenant_id, limit)
            rows = connection.execute(
                select(run_limit_keys.c.key, running, scheduled, total)
                .join(runs, runs.c.id == run_limit_keys.c.run_id)
                .where(
                    run_limit_keys.c.limit_id == found.id,
                    run_limit_keys.c.tenant_id == tenant_id,
                    runs.c.state.in_(COUNTED_STATES),
                )
                .group_by(run_limit_keys.c.key)
                .order_by(total.desc(), run_limit_keys.c.key)
                .limit(count)
            ).all()
        return [
            LimitKeyUsage(
                key=key,
                running=int(running_count),
                queued=int(all_count) - int(running_count) - int(scheduled_count),
                scheduled=int(scheduled_count),
            )
            for key, running_count, scheduled_count, all_count in rows
        ]

    @staticmethod
    def _get(
        connection: Connection, tenant_id: str, limit: str, *, for_update: bool = False
    ) -> Limit:
        return _limit(ROWS.row(connection, tenant_id, limit, for_update=for_update))
