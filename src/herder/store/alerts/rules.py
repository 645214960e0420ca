"""A tenant's alert rules. What a rule names (a job, a schedule, a workflow, its channels)
must be the tenant's own when the rule is made or changed: anything else is refused by the
field, never looked up across tenants."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.rules import (
    IncidentState,
    Rule,
    RuleChanges,
    RuleKind,
    RuleParams,
    RuleRequest,
)
from herder.domain.errors import FieldError, Invalid
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.alerts.managed import refuse_managed
from herder.store.database import Database
from herder.store.named import NamedRows
from herder.store.schema import (
    alert_channels,
    alert_incidents,
    alert_rules,
    jobs,
    schedules,
    tenants,
    workflows,
)

_NAMED: dict[str, Table] = {"job_id": jobs, "schedule_id": schedules, "workflow_id": workflows}


def _rule(row: Any) -> Rule:
    return Rule.model_validate(dict(row._mapping))


ROWS = NamedRows(alert_rules, "alert rule", _rule, found_by=("id",))


def _check(
    connection: Connection,
    tenant_id: str,
    kind: RuleKind,
    params: RuleParams,
    channel_ids: list[str],
) -> None:
    """Every field at fault, named: params of another kind, objects not the tenant's."""
    errors = [FieldError(field, message) for field, message in params.check_for(kind)]
    for name, table in _NAMED.items():
        wanted = getattr(params, name)
        if wanted is None or name not in params.model_fields_set:
            continue
        found = connection.execute(
            select(table.c.id).where(table.c.tenant_id == tenant_id, table.c.id == wanted)
        ).first()
        if found is None:
            errors.append(FieldError(f"params.{name}", f"no {name[:-3]} {wanted} in this tenant"))
    known = set(
        connection.execute(
            select(alert_channels.c.id).where(
                alert_channels.c.tenant_id == tenant_id, alert_channels.c.id.in_(channel_ids)
            )
        ).scalars()
    )
    errors += [
        FieldError("channel_ids", f"no alert channel {one} in this tenant")
        for one in channel_ids
        if one not in known
    ]
    if kind is RuleKind.LOOP_STALE:
        is_system = connection.execute(
            select(tenants.c.is_system).where(tenants.c.id == tenant_id)
        ).scalar()
        if not is_system:
            errors.append(FieldError("kind", "loop_stale rules belong to the system tenant"))
    if errors:
        raise Invalid("; ".join(f"{e.field}: {e.message}" for e in errors), errors=errors)


def resolve_open(connection: Connection, rule_id: str, why: str, now: datetime) -> None:
    """A rule turned off resolves its open incidents, with no notice: whoever turned it off
    wants no more pages about it. Called after the rule's row is changed: that waits for an
    evaluation holding it (``stored_rule`` locks it), so what that evaluation opened is
    resolved here too, and later ones see the rule off."""
    connection.execute(
        update(alert_incidents)
        .where(alert_incidents.c.rule_id == rule_id,
               alert_incidents.c.state == IncidentState.OPEN)
        .values(state=IncidentState.RESOLVED, open_key=None, resolved_at=now, resolution=why)
    )  # fmt: skip


class RuleRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def create(self, tenant_id: str, request: RuleRequest) -> Rule:
        now = self._clock.now()
        rule_id = new_id("alr", epoch_ms(now))
        channel_ids = list(dict.fromkeys(request.channel_ids))
        with self._db.write() as connection:
            _check(connection, tenant_id, request.kind, request.params, channel_ids)
            columns = {
                "kind": request.kind, "params": request.params.shown(request.kind),
                "channel_ids": channel_ids, "enabled": request.enabled,
                "notify_recovery": request.notify_recovery, "evaluated_at": now,
            }  # fmt: skip
            return ROWS.insert(connection, tenant_id, rule_id, request.name, columns, now)

    def get(self, tenant_id: str, rule_id: str) -> Rule:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, rule_id)

    def list(
        self,
        tenant_id: str,
        *,
        page: PageRequest = PageRequest(),
        name: str | None = None,
    ) -> Page[Rule]:
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page, name=name)

    def update(self, tenant_id: str, rule_id: str, changes: RuleChanges) -> Rule:
        """Change some fields; new params replace the old ones whole."""
        now = self._clock.now()

        def columns(row: Any) -> dict[str, Any]:
            refuse_managed("alert rule", row)
            rule = _rule(row)
            params = changes.params or RuleParams.model_validate(rule.params)
            channel_ids = list(dict.fromkeys(changes.channel_ids or rule.channel_ids))
            given = params if changes.params else RuleParams()
            _check(connection, tenant_id, rule.kind, given, channel_ids)
            values = changes.model_dump(exclude_none=True, exclude={"params", "channel_ids"})
            if changes.enabled and not rule.enabled:  # it looks forward from here again
                values["evaluated_at"] = now
            if changes.enabled is False and rule.enabled:
                turned_off.append(rule.id)
            return {**values, "params": params.shown(rule.kind), "channel_ids": channel_ids}

        turned_off: list[str] = []
        with self._db.write() as connection:
            rule = ROWS.edit(connection, tenant_id, rule_id, columns, now)
            for one in turned_off:
                resolve_open(connection, one, "rule disabled", now)
            return rule

    def delete(self, tenant_id: str, rule_id: str) -> None:
        """The rule goes; its incidents stay listed, the open ones resolved."""
        with self._db.write() as connection:
            refuse_managed("alert rule", ROWS.row(connection, tenant_id, rule_id))
            ROWS.delete(connection, tenant_id, rule_id)
            resolve_open(connection, rule_id, "rule deleted", self._clock.now())
