"""A tenant's triggers (``domain.triggers``, docs/events.md): what they are, and which ones
an event of a name wakes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.triggers import MAX_TRIGGERS_PER_EVENT, Trigger, TriggerSpec, check_declared
from herder.store.database import Database
from herder.store.named import NamedRows
from herder.store.schema import jobs, triggers, workflows


def _trigger(row: Any) -> Trigger:
    return Trigger.model_validate(
        {
            **row.spec,
            "id": row.id,
            "name": row.name,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "version": row.version,
        }
    )


def _columns(spec: TriggerSpec) -> dict[str, Any]:
    return {"event": spec.event, "spec": spec.model_dump(mode="json")}


ROWS = NamedRows(triggers, "trigger", _trigger)


def for_event(connection: Connection, tenant_id: str, name: str) -> list[Trigger]:
    """The tenant's triggers on events of ``name``, oldest first (at most
    ``MAX_TRIGGERS_PER_EVENT``: more cannot be made)."""
    rows = connection.execute(
        select(triggers)
        .where(triggers.c.tenant_id == tenant_id, triggers.c.event == name)
        .order_by(triggers.c.id)
        .limit(MAX_TRIGGERS_PER_EVENT)
    )
    return [_trigger(row) for row in rows]


def refuse_if_triggered(
    connection: Connection, tenant_id: str, kind: str, name: str, doing: str
) -> None:
    """``Conflict`` naming the triggers that start the job or workflow (``kind``) ``name``:
    they would fail at every event."""
    column = triggers.c.spec[kind].as_string()
    using = sorted(
        connection.execute(
            select(triggers.c.name).where(triggers.c.tenant_id == tenant_id, column == name)
        ).scalars()
    )
    if using:
        raise Conflict(
            f"{kind} {name!r} is started by trigger(s) {', '.join(using)}; change them before "
            f"{doing}"
        )


def _check(connection: Connection, tenant_id: str, spec: TriggerSpec, trigger_id: str) -> None:
    """The target exists and declares the trigger's parameters (a trigger that names nothing,
    or a parameter its target refuses, would fail at every event), and the event has room
    for one more trigger."""
    check_declared(spec, _declared(connection, tenant_id, spec))
    others = [one for one in for_event(connection, tenant_id, spec.event) if one.id != trigger_id]
    if len(others) >= MAX_TRIGGERS_PER_EVENT:
        raise Invalid(
            f"event {spec.event} has {MAX_TRIGGERS_PER_EVENT} triggers already: the most one "
            "event may start",
            field="event",
        )


def _declared(connection: Connection, tenant_id: str, spec: TriggerSpec) -> set[str]:
    """The names of the parameters the trigger's job or workflow declares (as its stored
    spec says); ``Invalid`` naming ``job`` or ``workflow`` when there is none of that name."""
    table, field, target = (
        (jobs, "job", spec.job) if spec.job is not None else (workflows, "workflow", spec.workflow)
    )
    stored = connection.execute(
        select(table.c.spec).where(table.c.tenant_id == tenant_id, table.c.name == target)
    ).scalar()
    if stored is None:
        raise Invalid(f"no {field} named {target}", field=field)
    if field == "job":
        return {parameter["name"] for parameter in stored.get("parameters", [])}
    return set(stored.get("params", {}))


class TriggerRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def create(self, tenant_id: str, name: str, spec: TriggerSpec) -> Trigger:
        now = self._clock.now()
        trigger_id = new_id("trg", epoch_ms(now))
        with self._db.write() as connection:
            _check(connection, tenant_id, spec, trigger_id)
            return ROWS.insert(connection, tenant_id, trigger_id, name, _columns(spec), now)

    def get(self, tenant_id: str, trigger: str) -> Trigger:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, trigger)

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[Trigger]:
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page)

    def edit(
        self,
        tenant_id: str,
        trigger: str,
        change: Callable[[Trigger], TriggerSpec],
        *,
        if_version: frozenset[int] | None = None,
    ) -> Trigger:
        def columns(row: Any) -> dict[str, Any]:
            spec = change(_trigger(row))
            _check(connection, tenant_id, spec, row.id)
            return _columns(spec)

        with self._db.write() as connection:
            return ROWS.edit(
                connection, tenant_id, trigger, columns, self._clock.now(), if_version=if_version
            )

    def delete(self, tenant_id: str, trigger: str) -> None:
        with self._db.write() as connection:
            ROWS.delete(connection, tenant_id, trigger)
