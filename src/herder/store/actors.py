"""The names of who a run's events and attempts name by id — the tenant's keys and the
workers — read once for a whole run; and people's names for the creators a page of objects
names (``people_names``, for ``app.actors``)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, select

from herder.domain.actors import (
    api_key_of,
    key_shown,
    person_of,
    user_actor,
    worker_of,
)
from herder.domain.models import RunDetail
from herder.store.schema import api_keys, users, workers


def with_actor_names(connection: Connection, tenant_id: str, run: RunDetail) -> RunDetail:
    """``run`` with each event done by one of the tenant's keys called by the key's name and
    role, by a signed-in person by their name, and by a worker by the worker's name
    (``actor_name``), each attempt with its worker's name, and its creator named
    (``created_by_name``), in a query each; the scheduler's actors have none."""
    actors = {event.actor for event in run.events} | ({run.created_by} if run.created_by else set())
    found = _keys(connection, tenant_id, {key for actor in actors if (key := api_key_of(actor))})
    people = _people(connection, tenant_id, actors)
    wanted_workers = {attempt.worker_id for attempt in run.attempts}
    wanted_workers |= {worker for event in run.events if (worker := worker_of(event.actor))}
    workers_named: dict[str, str] = {}
    if wanted_workers:
        rows = connection.execute(
            select(workers.c.id, workers.c.name).where(workers.c.id.in_(sorted(wanted_workers)))
        )
        workers_named = {row.id: row.name for row in rows}

    def name_of(actor: str) -> str | None:
        if (key := api_key_of(actor)) is not None:
            return key_shown(*found[key]) if key in found else None
        if actor in people:
            return people[actor]
        return workers_named.get(worker_of(actor) or "")

    creator = run.created_by or ""
    key = api_key_of(creator)
    creator_name = found[key][0] if key in found else people.get(creator)
    events = [event.model_copy(update={"actor_name": name_of(event.actor)}) for event in run.events]
    attempts = [
        attempt.model_copy(update={"worker_name": workers_named.get(attempt.worker_id)})
        for attempt in run.attempts
    ]
    return run.model_copy(
        update={"events": events, "attempts": attempts, "created_by_name": creator_name}
    )


def people_names(connection: Connection, tenant_id: str, actors: Collection[str]) -> dict[str, str]:
    """Each of these actors that is one of the tenant's people, by name: a key's
    (``user:key_…``) its name, in one query; the system's actors and another tenant's keys
    have none."""
    keys = {key for actor in actors if (key := api_key_of(actor))}
    names = {
        user_actor(key_id): name for key_id, (name, _) in _keys(connection, tenant_id, keys).items()
    }
    return names | _people(connection, tenant_id, actors)


def _people(connection: Connection, tenant_id: str, actors: Collection[str]) -> dict[str, str]:
    """Signed-in people (``user:usr_…``) by the name their provider last gave: the tenant's
    people only (one moved to another tenant since is unknown here)."""
    people = sorted({person for actor in actors if (person := person_of(actor))})
    if not people:
        return {}
    rows = connection.execute(
        select(users.c.id, users.c.name).where(
            users.c.tenant_id == tenant_id, users.c.id.in_(people)
        )
    )
    return {user_actor(row.id): row.name for row in rows}


def _keys(
    connection: Connection, tenant_id: str, key_ids: Collection[str]
) -> dict[str, tuple[str, str]]:
    """The tenant's keys of these ids: id → (name, role)."""
    if not key_ids:
        return {}
    rows = connection.execute(
        select(api_keys.c.id, api_keys.c.name, api_keys.c.role).where(
            api_keys.c.tenant_id == tenant_id, api_keys.c.id.in_(sorted(key_ids))
        )
    )
    return {row.id: (row.name, row.role) for row in rows}
