"""The names of who a run's events and attempts name by id — the tenant's keys and the
workers — read once for a whole run."""

from __future__ import annotations

from sqlalchemy import Connection, select

from herder.domain.actors import key_of, key_shown, worker_of
from herder.domain.models import RunDetail
from herder.store.schema import api_keys, workers


def with_actor_names(connection: Connection, tenant_id: str, run: RunDetail) -> RunDetail:
    """``run`` with each event done by one of the tenant's keys called by the key's name and
    role, and by a worker by the worker's name (``actor_name``), and each attempt with its
    worker's name, in a query each; the scheduler's actors have none."""
    wanted_keys = {key for event in run.events if (key := key_of(event.actor))}
    wanted_workers = {attempt.worker_id for attempt in run.attempts}
    wanted_workers |= {worker for event in run.events if (worker := worker_of(event.actor))}
    keys: dict[str, str] = {}
    if wanted_keys:
        rows = connection.execute(
            select(api_keys.c.id, api_keys.c.name, api_keys.c.role).where(
                api_keys.c.tenant_id == tenant_id, api_keys.c.id.in_(sorted(wanted_keys))
            )
        )
        keys = {row.id: key_shown(row.name, row.role) for row in rows}
    names: dict[str, str] = {}
    if wanted_workers:
        rows = connection.execute(
            select(workers.c.id, workers.c.name).where(workers.c.id.in_(sorted(wanted_workers)))
        )
        names = {row.id: row.name for row in rows}
    if not keys and not names:
        return run

    def name_of(actor: str) -> str | None:
        if (key := key_of(actor)) is not None:
            return keys.get(key)
        return names.get(worker_of(actor) or "")

    events = [event.model_copy(update={"actor_name": name_of(event.actor)}) for event in run.events]
    attempts = [
        attempt.model_copy(update={"worker_name": names.get(attempt.worker_id)})
        for attempt in run.attempts
    ]
    return run.model_copy(update={"events": events, "attempts": attempts})
