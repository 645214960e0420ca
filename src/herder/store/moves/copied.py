"""What a tenant's move copies from one cell to the other: its definitions' tables, in the
order the import inserts them (the reverse: a partial import's removal), each with the rows
that are the tenant's; which values travel sealed, and what each is bound to. History (runs,
events, schedules' own events, usage, backfills) stays in the cell it was made in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import ColumnElement, Table, select

from herder.domain.moves import MoveState
from herder.keyring import associated_data, channel_associated_data, hook_associated_data
from herder.store.schema import (
    alert_channels,
    alert_rules,
    api_keys,
    artifacts,
    hooks,
    job_labels,
    job_notices,
    jobs,
    limits,
    pool_shares,
    schedules,
    secrets,
    tenant_budgets,
    tenants,
    triggers,
    workflow_versions,
    workflows,
)

SEALED_COLUMNS = ("key_id", "nonce", "ciphertext")
SEALED_VALUE = "sealed_value"  # the opened value in a document, base64
SEALED_TABLES = frozenset({"secrets", "hooks", "alert_channels"})


def _owned(table: Table) -> Callable[[str], ColumnElement[bool]]:
    return lambda tenant_id: table.c.tenant_id == tenant_id


# each table and its rows of one tenant, parents before their children
COPIED: tuple[tuple[Table, Callable[[str], ColumnElement[bool]]], ...] = (
    (tenants, lambda tenant_id: tenants.c.id == tenant_id),
    (api_keys, _owned(api_keys)),
    (tenant_budgets, _owned(tenant_budgets)),
    (pool_shares, _owned(pool_shares)),
    (artifacts, _owned(artifacts)),
    (jobs, _owned(jobs)),
    (
        job_labels,
        lambda tenant_id: job_labels.c.job_id.in_(
            select(jobs.c.id).where(jobs.c.tenant_id == tenant_id)
        ),
    ),
    (workflows, _owned(workflows)),
    (
        workflow_versions,
        lambda tenant_id: workflow_versions.c.workflow_id.in_(
            select(workflows.c.id).where(workflows.c.tenant_id == tenant_id)
        ),
    ),
    (schedules, _owned(schedules)),
    (limits, _owned(limits)),
    (triggers, _owned(triggers)),
    (hooks, _owned(hooks)),
    (secrets, _owned(secrets)),
    (alert_channels, _owned(alert_channels)),
    (alert_rules, _owned(alert_rules)),
    (job_notices, _owned(job_notices)),  # a person's notices: its channel and rules above
)
TABLES = {table.name: table for table, _ in COPIED}
# the rows a table's rows hang from: (column, parent table) — their ids must be the tenant's
CHILDREN = {"job_labels": ("job_id", "jobs"), "workflow_versions": ("workflow_id", "workflows")}


def associated(table: str, tenant_id: str, row: Mapping[str, Any]) -> bytes:
    """What a sealed value of ``table`` is bound to (the same ids in both cells)."""
    if table == "secrets":
        return associated_data(tenant_id, str(row["name"]), int(row["version"]))
    if table == "hooks":
        return hook_associated_data(tenant_id, str(row["id"]))
    return channel_associated_data(tenant_id, str(row["id"]))


def state_of(value: str | None) -> MoveState | None:
    """A tenant's stored ``move_state`` (NULL: at home)."""
    return None if value is None else MoveState(value)
