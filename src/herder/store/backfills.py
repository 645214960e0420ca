"""Backfills of schedules (``domain.backfills``) as users see them: read and listed.
Created and cancelled: ``app.backfills``; moved on inside the unit of work that created it
or ended one of its runs: ``app.follow_ups.step_backfill``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from herder.domain.backfills import Backfill
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.database import Database
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import backfills, schedules


def _backfill(row: Any) -> Backfill:
    return Backfill.model_validate(dict(row._mapping))


class BackfillRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, tenant_id: str, backfill_id: str) -> Backfill:
        with self._db.read() as connection:
            return read_backfill(connection, tenant_id, backfill_id)

    def list(
        self, tenant_id: str, schedule_id: str, *, page: PageRequest = PageRequest()
    ) -> Page[Backfill]:
        query = select(backfills).where(
            backfills.c.tenant_id == tenant_id, backfills.c.schedule_id == schedule_id
        )
        with self._db.read() as connection:
            schedule_row(connection, tenant_id, schedule_id)
            return page_of(connection, query, backfills.c.id, _backfill, page)


def read_backfill(connection: Connection, tenant_id: str, backfill_id: str) -> Backfill:
    return _backfill(owned_row(connection, backfills, tenant_id, backfill_id, "backfill"))


def schedule_row(connection: Connection, tenant_id: str, schedule_id: str) -> Any:
    return owned_row(connection, schedules, tenant_id, schedule_id, "schedule")
