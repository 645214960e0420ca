"""What a submission's limit strategies read (``domain.lifecycle.limit_strategies``): the
rooms of the keys its new runs count against, where the limit's strategy acts at submit,
with the keys' active runs locked; and the admission of a batch of new runs under them.

The limits read are locked too (``FOR UPDATE``): two submissions to one limit decide one
after the other, so a full key is never over-filled by a race."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection, select

from herder.domain.errors import Conflict
from herder.domain.lifecycle.changes import Changes, NewRun, combine
from herder.domain.lifecycle.limit_strategies import KeyRoom, admit_all
from herder.domain.limits import LimitSpec, LimitStrategy
from herder.store.limits import COUNTED_STATES
from herder.store.runs.facts import active_runs
from herder.store.schema import limits, run_limit_keys, runs


@dataclass(frozen=True)
class Limited:
    """A batch of new runs under their limits: the runs to insert (a ``cancel_newest`` one
    already cancelled), the cancels they make, and why each dropped run was not made."""

    new_runs: tuple[NewRun, ...]
    changes: Changes
    dropped: dict[str, str]  # run id → why

    def refusal(self, run_id: str) -> Conflict | None:
        """Why a dropped submission made no run, as its 409."""
        why = self.dropped.get(run_id)
        return None if why is None else Conflict(f"not submitted: {why}")


def by_limits(connection: Connection, new_runs: Sequence[NewRun], now: datetime) -> Limited:
    """The new runs under their keys' strategies; a run whose idempotency key already made
    one is left as it is (its insert will make nothing, so it may cancel nothing)."""
    repeats = _repeated(connection, new_runs)
    deciding = [new for new in new_runs if new.id not in repeats]
    rooms = key_rooms(connection, deciding)
    if not rooms:
        return Limited(tuple(new_runs), Changes(), {})
    decided = admit_all(deciding, rooms, now)
    dropped = {
        run_id: admission.dropped
        for run_id, admission in decided.items()
        if admission.dropped is not None
    }
    made = [
        decided[new.id].changes.new_runs[-1] if new.id in decided else new
        for new in new_runs
        if new.id not in dropped
    ]
    cancels = combine(replace(admission.changes, new_runs=()) for admission in decided.values())
    return Limited(tuple(made), cancels, dropped)


def _repeated(connection: Connection, new_runs: Sequence[NewRun]) -> set[str]:
    """The ids of the new runs naming limits whose tenant's idempotency key already has a
    run (one query, none when no such run carries a key)."""
    keyed = [new for new in new_runs if new.spec.limits and new.idempotency_key is not None]
    if not keyed:
        return set()
    rows = connection.execute(
        select(runs.c.tenant_id, runs.c.idempotency_key).where(
            runs.c.tenant_id.in_({new.tenant_id for new in keyed}),
            runs.c.idempotency_key.in_({new.idempotency_key for new in keyed}),
        )
    ).all()
    used = {(row.tenant_id, row.idempotency_key) for row in rows}
    return {new.id for new in keyed if (new.tenant_id, new.idempotency_key) in used}


def named_limits(
    connection: Connection, new_runs: Sequence[NewRun]
) -> dict[tuple[str, str], tuple[str, LimitSpec]]:
    """The limits the new runs name, locked: (tenant id, name) → (limit id, spec)."""
    named = [new for new in new_runs if new.spec.limits]
    if not named:
        return {}
    rows = connection.execute(
        select(limits.c.id, limits.c.tenant_id, limits.c.name, limits.c.spec)
        .where(
            limits.c.tenant_id.in_({new.tenant_id for new in named}),
            limits.c.name.in_({ref.limit for new in named for ref in new.spec.limits}),
        )
        .order_by(limits.c.id)
        .with_for_update()
    ).all()
    return {(row.tenant_id, row.name): (row.id, LimitSpec.model_validate(row.spec)) for row in rows}


def key_rooms(connection: Connection, new_runs: Sequence[NewRun]) -> dict[str, list[KeyRoom]]:
    """Each new run's rooms (by run id), for the limits whose strategy acts at submit; none
    read (one query) where no new run names a limit."""
    named = [new for new in new_runs if new.spec.limits]
    acting = {
        name: (limit_id, spec)
        for name, (limit_id, spec) in named_limits(connection, named).items()
        if spec.strategy is not LimitStrategy.QUEUE and spec.max_running is not None
    }
    if not acting:
        return {}
    wanted = {
        (acting[new.tenant_id, ref.limit][0], ref.key)
        for new in named
        for ref in new.spec.limits
        if (new.tenant_id, ref.limit) in acting
    }
    holders = connection.execute(
        select(run_limit_keys.c.run_id, run_limit_keys.c.limit_id, run_limit_keys.c.key)
        .join(runs, runs.c.id == run_limit_keys.c.run_id)
        .where(
            run_limit_keys.c.limit_id.in_({limit_id for limit_id, _ in wanted}),
            run_limit_keys.c.key.in_({key for _, key in wanted}),
            runs.c.state.in_(COUNTED_STATES),
        )
    ).all()
    holding = [
        (run_id, limit_id, key) for run_id, limit_id, key in holders if (limit_id, key) in wanted
    ]
    locked = active_runs(connection, {run_id for run_id, _, _ in holding})
    found = {active.run.id: active for active in locked}
    by_key: dict[tuple[str, str], list[str]] = {}
    for run_id, limit_id, key in holding:
        if run_id in found:
            by_key.setdefault((limit_id, key), []).append(run_id)
    rooms: dict[str, list[KeyRoom]] = {}
    for new in named:
        for ref in new.spec.limits:
            if (new.tenant_id, ref.limit) not in acting:
                continue
            limit_id, spec = acting[new.tenant_id, ref.limit]
            assert spec.max_running is not None
            holders_of = sorted(by_key.get((limit_id, ref.key), []))
            rooms.setdefault(new.id, []).append(
                KeyRoom(
                    ref.limit,
                    ref.key,
                    spec.max_running,
                    spec.strategy,
                    tuple(found[run_id] for run_id in holders_of),
                )
            )
    return rooms
