"""The names of the keys that run events name as their actors, read once for a whole run."""

from __future__ import annotations

from sqlalchemy import Connection, select

from herder.domain.actors import key_of, key_shown
from herder.domain.models import RunDetail
from herder.store.schema import api_keys


def with_actor_names(connection: Connection, tenant_id: str, run: RunDetail) -> RunDetail:
    """``run`` with each event done by one of the tenant's keys called by the key's name and
    role (``actor_name``), in one query; other actors (workers, the scheduler) have none."""
    wanted = {key for event in run.events if (key := key_of(event.actor))}
    if not wanted:
        return run
    rows = connection.execute(
        select(api_keys.c.id, api_keys.c.name, api_keys.c.role).where(
            api_keys.c.tenant_id == tenant_id, api_keys.c.id.in_(sorted(wanted))
        )
    )
    names = {row.id: key_shown(row.name, row.role) for row in rows}
    events = [
        event.model_copy(update={"actor_name": names.get(key_of(event.actor) or "")})
        for event in run.events
    ]
    return run.model_copy(update={"events": events})
