"""What alerting did, as a tenant reads it: its incidents and its deliveries, newest first."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from herder.domain.alerts.rules import Delivery, Incident, IncidentState
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.database import Database
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import alert_channels, alert_deliveries, alert_incidents


def _incident(row: Any) -> Incident:
    return Incident.model_validate(dict(row._mapping))


def _delivery(row: Any) -> Delivery:
    return Delivery.model_validate(dict(row._mapping))


class AlertHistoryRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def incidents(
        self,
        tenant_id: str,
        *,
        state: IncidentState | None = None,
        rule_id: str | None = None,
        page: PageRequest = PageRequest(),
    ) -> Page[Incident]:
        query = select(alert_incidents).where(alert_incidents.c.tenant_id == tenant_id)
        if state is not None:
            query = query.where(alert_incidents.c.state == state)
        if rule_id is not None:
            query = query.where(alert_incidents.c.rule_id == rule_id)
        with self._db.read() as connection:
            return page_of(connection, query, alert_incidents.c.id, _incident, page)

    def deliveries(
        self, tenant_id: str, *, channel_id: str | None = None, page: PageRequest = PageRequest()
    ) -> Page[Delivery]:
        """The tenant's deliveries, or one channel's (another tenant's channel: not found)."""
        columns = [c for c in alert_deliveries.c if c.name != "tenant_id"]
        query = select(*columns).where(alert_deliveries.c.tenant_id == tenant_id)
        with self._db.read() as connection:
            if channel_id is not None:
                owned_row(connection, alert_channels, tenant_id, channel_id, "alert channel")
                query = query.where(alert_deliveries.c.channel_id == channel_id)
            return page_of(connection, query, alert_deliveries.c.id, _delivery, page)
