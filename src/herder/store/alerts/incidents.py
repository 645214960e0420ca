"""What one evaluation of an alert rule writes (``app/alerts.py`` decides): incidents opened,
seen again and resolved, their deliveries queued, and the rule's ``evaluated_at``.

Opening inserts under the unique ``open_key`` (rule and key) and ignores a duplicate, and
resolving is guarded by the incident still being open, so two evaluators racing make one
incident and one notice each way.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select, update

from herder.clock import epoch_ms
from herder.domain.alerts.decisions import Signal
from herder.domain.alerts.rules import IncidentState
from herder.domain.ids import new_id
from herder.store.alerts.channels import add_deliveries
from herder.store.alerts.signals import StoredRule
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.schema import alert_incidents, alert_rules
from herder.store.work import Work


def open_incidents(work: Work, rule_id: str) -> dict[str, Any]:
    """The rule's open incidents, by key."""
    rows = work.connection.execute(
        select(alert_incidents.c.id, alert_incidents.c.key, alert_incidents.c.opened_at,
               alert_incidents.c.summary, alert_incidents.c.details)
        .where(alert_incidents.c.rule_id == rule_id,
               alert_incidents.c.state == IncidentState.OPEN)
    ).all()  # fmt: skip
    return {row.key: row for row in rows}


def open_incident(work: Work, rule: StoredRule, signal: Signal) -> None:
    """Open the key's incident and queue its notices — unless another evaluator did."""
    incident_id = new_id("inc", epoch_ms(work.now))
    details = dict(signal.details)
    inserted = work.connection.execute(
        insert_ignoring_duplicates(
            work.database, alert_incidents, id=incident_id, tenant_id=rule.tenant_id,
            rule_id=rule.id, key=signal.key, state=IncidentState.OPEN,
            open_key=f"{rule.id} {signal.key}", summary=signal.summary, details=details,
            opened_at=work.now, last_seen_at=work.now,
        ).returning(alert_incidents.c.id)
    ).first()  # fmt: skip
    if inserted is None:  # another evaluator opened it first: its notice is the one
        return
    incident = {"id": incident_id, "key": signal.key, "state": "open",
                "summary": signal.summary, "details": details,
                "opened_at": work.now.isoformat(), "resolved_at": None}  # fmt: skip
    add_deliveries(work.database, work.connection, rule.tenant_id, rule.channel_ids,
                   incident_id, "opened", _payload(rule, "opened", incident), work.now)  # fmt: skip


def resolve_incident(work: Work, rule: StoredRule, incident_id: str, signal: Signal) -> None:
    """Resolve it while it is open; its recovery notices if the rule asks for them."""
    resolved = work.connection.execute(
        update(alert_incidents)
        .where(alert_incidents.c.id == incident_id, alert_incidents.c.state == IncidentState.OPEN)
        .values(state=IncidentState.RESOLVED, open_key=None, resolved_at=work.now,
                last_seen_at=work.now, resolution=signal.summary)
    ).rowcount  # fmt: skip
    if not resolved or not rule.notify_recovery:
        return
    row = work.connection.execute(
        select(alert_incidents).where(alert_incidents.c.id == incident_id)
    ).one()
    incident = {
        "id": incident_id, "key": row.key, "state": "resolved", "summary": row.summary,
        "details": row.details, "recovery": signal.summary,
        "opened_at": row.opened_at.isoformat(), "resolved_at": work.now.isoformat(),
    }  # fmt: skip
    payload = _payload(rule, "resolved", incident)
    add_deliveries(work.database, work.connection, rule.tenant_id, rule.channel_ids,
                   incident_id, "resolved", payload, work.now)  # fmt: skip


def seen_again(work: Work, rows: Collection[Any], signals: Collection[Signal]) -> None:
    """Open incidents still firing: ``last_seen_at`` moves, and the summary and details
    follow what was seen (the streak's latest runs, the p99…) — written only when they
    changed, so a steady incident costs one update of all of them."""
    latest = {signal.key: signal for signal in signals}
    for row in rows:
        signal = latest[row.key]
        if (signal.summary, dict(signal.details)) != (row.summary, row.details):
            work.connection.execute(
                update(alert_incidents)
                .where(alert_incidents.c.id == row.id,
                       alert_incidents.c.state == IncidentState.OPEN)
                .values(summary=signal.summary, details=dict(signal.details))
            )  # fmt: skip
    if rows:
        work.connection.execute(
            update(alert_incidents)
            .where(alert_incidents.c.id.in_([row.id for row in rows]),
                   alert_incidents.c.state == IncidentState.OPEN)
            .values(last_seen_at=work.now)
        )  # fmt: skip


def mark_evaluated(work: Work, rule_id: str) -> None:
    work.connection.execute(
        update(alert_rules).where(alert_rules.c.id == rule_id).values(evaluated_at=work.now)
    )


def _payload(rule: StoredRule, event: str, incident: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": event,
        "tenant_id": rule.tenant_id,
        "rule": {"id": rule.id, "name": rule.name, "kind": rule.kind.value},
        "incident": incident,
    }
