"""What a debounce reads and writes at submit (``domain.debounce``): the debounced limits the
new runs name (locked, so two submissions to one key decide one after the other), the runs
of their keys still waiting out a window, and those runs' new start (and values) when a
submission joins them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, select, update

from herder.domain.debounce import Debounced, DebounceKey, Waiting, debounce
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.limits import Debounce
from herder.domain.states import RunState
from herder.store.runs.limit_rooms import named_limits
from herder.store.runs.writes import record_events
from herder.store.schema import run_limit_keys, runs


def debounced(
    connection: Connection, new_runs: Sequence[NewRun], now: datetime, actor: str
) -> Debounced:
    """The new runs with their debounced keys' submissions folded into one run each; the
    waiting runs that submissions joined are moved on (and take the last values) here."""
    windows = _windows(connection, new_runs)
    if not windows:
        return Debounced(tuple(new_runs), {}, {})
    waiting = _waiting(connection, {key for key, _ in windows.values()}, now)
    decided = debounce(new_runs, windows, waiting, now)
    for run_id, (start, spec) in decided.moved.items():
        values: dict[str, object] = {"run_at": start}
        if spec is not None:
            values |= {"spec": spec.model_dump(mode="json"), "pool": spec.pool}
        connection.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.state == RunState.QUEUED, runs.c.run_at > now)
            .values(**values)
        )
    joined = [
        Event(run_id, f"a submission by {actor} joined it (debounce); it starts at "
              f"{decided.moved[run_id][0]:%H:%M:%S} UTC", actor)
        for run_id in sorted(set(decided.joined.values()) & set(decided.moved))
    ]  # fmt: skip
    record_events(connection, now, joined)
    return decided


def _windows(
    connection: Connection, new_runs: Sequence[NewRun]
) -> dict[str, tuple[DebounceKey, Debounce]]:
    """Each new run's debounced key (its first limit that debounces) and window."""
    named = [new for new in new_runs if new.spec.limits]
    debouncing = {
        name: (limit_id, spec.debounce)
        for name, (limit_id, spec) in named_limits(connection, named).items()
        if spec.debounce is not None
    }
    found = {}
    for new in named:
        for ref in new.spec.limits:
            if (new.tenant_id, ref.limit) in debouncing:
                limit_id, window = debouncing[new.tenant_id, ref.limit]
                found[new.id] = ((limit_id, ref.key, new.job_id), window)
                break
    return found


def _waiting(
    connection: Connection, keys: set[DebounceKey], now: datetime
) -> dict[DebounceKey, Waiting]:
    """The oldest run of each key still waiting out its window (queued, to start later)."""
    rows = connection.execute(
        select(
            run_limit_keys.c.limit_id, run_limit_keys.c.key, runs.c.job_id, runs.c.id,
            runs.c.created_at,
        )
        .join(runs, runs.c.id == run_limit_keys.c.run_id)
        .where(
            run_limit_keys.c.limit_id.in_({limit_id for limit_id, _, _ in keys}),
            run_limit_keys.c.key.in_({key for _, key, _ in keys}),
            runs.c.state == RunState.QUEUED,
            runs.c.run_at > now,
        )
        .order_by(runs.c.id)
    ).all()  # fmt: skip
    found: dict[DebounceKey, Waiting] = {}
    for limit_id, key, job_id, run_id, created_at in rows:
        name = (limit_id, key, job_id)
        if name in keys and name not in found:
            found[name] = Waiting(run_id, created_at)
    return found
