"""``herder schedule backfill`` and ``herder workflow schedule|backfill``: schedules of
workflows, and a schedule's past nominal times run a few at a time."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated

import typer
from rich.progress import Progress

from herder.cli.common import JsonFlag, client, fail, iso_moment, out, print_json, when
from herder.cli.ids import SCHEDULE, full_id, workflow_of
from herder.cli.schedules import schedule_app
from herder.cli.workflows import workflow_app
from herder.client import HerderClient
from herder.domain.backfills import Backfill, BackfillState

MaxActive = Annotated[int, typer.Option(help="runs of the backfill active at once (1-100)")]
Moment = Annotated[str, typer.Option(help="ISO 8601 with an offset, e.g. 2026-11-01T00:00:00Z")]
Wait = Annotated[bool, typer.Option(help="show progress until every time has run")]


def _moment(text: str, option: str) -> datetime:
    return iso_moment(text, option, " is not an ISO 8601 time")


def _backfill(
    herder: HerderClient, schedule_id: str, start: str, end: str, max_active: int, wait: bool
) -> Backfill:
    made = herder.backfill(
        schedule_id, start=_moment(start, "--start"), end=_moment(end, "--end"),
        max_active=max_active,
    )  # fmt: skip
    if not wait:
        return made
    with Progress(console=out, transient=True) as progress:
        bar = progress.add_task(f"backfill {made.id}", total=None)
        while made.state is BackfillState.RUNNING:
            progress.update(bar, completed=made.started + made.already_run)
            time.sleep(0.5)
            made = herder.get_backfill(made.id)
    return made


def _report(backfill: Backfill, as_json: bool) -> None:
    if as_json:
        print_json(backfill)
        return
    out.print(
        f"backfill [bold]{backfill.id}[/] {backfill.state}: {backfill.started} run(s) started, "
        f"{backfill.already_run} time(s) already run; last time {when(backfill.cursor)} UTC"
    )


@schedule_app.command("backfill")
def schedule_backfill(
    schedule_id: str,
    start: Moment,
    end: Moment,
    max_active: MaxActive = 1,
    wait: Wait = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the schedule's nominal times after --start up to --end, each once, at low
    priority, --max-active at a time."""
    with client() as herder:
        schedule_id = full_id(herder, SCHEDULE, schedule_id)
        _report(_backfill(herder, schedule_id, start, end, max_active, wait), as_json)


@workflow_app.command("schedule")
def workflow_schedule(
    workflow: str,
    cron: Annotated[str, typer.Argument(help="e.g. '0 3 * * *' or @daily")],
    timezone: Annotated[str, typer.Option(help="IANA zone, e.g. Europe/Paris")] = "UTC",
    concurrency: Annotated[str, typer.Option(help="allow, forbid or replace")] = "allow",
    name: Annotated[str | None, typer.Option(help="unique in the tenant")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Start the workflow (by name or id) on a cron schedule."""
    spec = {"cron": cron, "timezone": timezone, "concurrency_policy": concurrency}
    with client() as herder:
        target = {"workflow_id": workflow_of(herder, workflow).id}
        schedule = herder.create_schedule_of(target, spec | ({"name": name} if name else {}))
    if as_json:
        print_json(schedule)
    else:
        out.print(
            f"created schedule [bold]{schedule.id}[/]; next fire {when(schedule.next_due_at)} UTC"
        )


@workflow_app.command("backfill")
def workflow_backfill(
    workflow: str,
    start: Moment,
    end: Moment,
    schedule: Annotated[
        str | None, typer.Option(help="which of the workflow's schedules (if it has several)")
    ] = None,
    max_active: MaxActive = 1,
    wait: Wait = False,
    as_json: JsonFlag = False,
) -> None:
    """Run a schedule of the workflow over a past range: one workflow run per nominal time."""
    with client() as herder:
        if schedule is None:
            found = herder.list_schedules(workflow_id=workflow_of(herder, workflow).id).items
            if len(found) != 1:
                raise fail(
                    f"workflow {workflow!r} has {len(found)} schedules; name one with --schedule"
                )
            schedule = found[0].id
        _report(_backfill(herder, schedule, start, end, max_active, wait), as_json)
