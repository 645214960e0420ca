"""The ``herder`` command: run the system (up, server, scheduler, worker) and drive it
(job, run, workflow, schedule, event, trigger, hook, queue, top, tenant, pool, key, session,
audit, workers; apply and export definitions files).
One module per group of commands; ``common`` holds the root app."""

from __future__ import annotations

import sys

from herder.cli import (
    alerts,
    apply,
    approvals,
    audit,
    autoscaler,
    backfills,
    cells,
    edge,
    events,
    hooks,
    jobs,
    keys,
    limits,
    pools,
    queue,
    runs,
    schedules,
    secrets,
    sessions,
    sign_in,
    system,
    tenants,
    top,
    triggers,
    usage,
    workers,
    workflows,
)
from herder.cli.common import app, err
from herder.cli.help import arrange
from herder.client import ClientError

arrange(app)

__all__ = [
    "alerts", "apply", "approvals", "audit", "autoscaler", "backfills", "cells", "edge",
    "events", "hooks", "jobs", "keys", "limits", "main", "pools", "queue", "runs", "schedules",
    "secrets", "sessions", "sign_in", "system", "tenants", "top", "triggers", "usage", "workers",
    "workflows",
]  # fmt: skip


def main() -> None:
    try:
        app()
    except ClientError as error:
        err.print(f"[bold red]error:[/] {error}", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
