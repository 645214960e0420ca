"""``herder schedule …``: run jobs on a cron schedule."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from herder.cli.answers import acted_on
from herder.cli.common import JsonFlag, app, client, out, pairs, print_json, when
from herder.cli.creators import CreatedByOption, creator_shown
from herder.cli.deadline_options import (
    DeadlineCancelOption,
    DeadlineOption,
    deadline_of,
    deadline_words,
)
from herder.cli.ids import (
    JOB,
    SCHEDULE,
    WORKFLOW,
    QuietFlag,
    full_id,
    job_of,
    names_of,
    quiet_ids,
    short_ids,
)
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.models import Schedule

schedule_app = typer.Typer(help="Run jobs on a cron schedule.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")

CREATED_FIRES_SHOWN = 3


def _target_names(herder: HerderClient, items: list[Schedule]) -> dict[str, str]:
    """What each schedule starts, by name: one listing of jobs and one of workflows per
    command (paged, and only as far as needed), never a request per row."""
    job_ids = {schedule.job_id for schedule in items if schedule.job_id}
    workflow_ids = {schedule.workflow_id for schedule in items if schedule.workflow_id}
    names = names_of(herder, JOB, job_ids)
    workflows = names_of(herder, WORKFLOW, workflow_ids)
    return names | {workflow_id: f"{name} (workflow)" for workflow_id, name in workflows.items()}


def _schedule_table(
    items: list[Schedule], names: dict[str, str], *, whole_ids: bool = False
) -> Listing:
    """Schedules, each id as its shortest unique start (``whole_ids``: as it is, for one); at
    80 columns the counts, the zone, the cron expression and the target give way, in that
    order (the next fire says when)."""
    ids = [schedule.id for schedule in items]
    shown = dict(zip(ids, ids, strict=True)) if whole_ids else short_ids(ids)
    table = Listing(
        "ID", "NAME", Field("JOB/WORKFLOW", drop=3), Field("CRON", drop=4),
        Field("ZONE", drop=5), "NEXT (UTC)", "STATE", Field("FIRED", drop=6),
        Field("MISSED", drop=7),
    )  # fmt: skip
    for schedule in items:
        spec = schedule.spec
        target = schedule.job_id or schedule.workflow_id or ""
        table.add_row(
            shown[schedule.id], schedule.name or "", names.get(target, target), spec.cron,
            spec.timezone, when(schedule.next_due_at), "paused" if schedule.paused else "active",
            str(schedule.fired_count), str(schedule.missed_count),
        )  # fmt: skip
    return table


def _fire_lines(fires: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Each fire as the schedule's zone sees it (with its offset), then in UTC."""
    for fire in fires:
        local = datetime.fromisoformat(fire["local"])
        utc = datetime.fromisoformat(fire["utc"])
        yield f"  {local.isoformat(sep=' ')}  ({utc:%Y-%m-%d %H:%M:%S} UTC)"


@schedule_app.command("create")
def schedule_create(
    job: str,
    cron: Annotated[str, typer.Argument(help="e.g. '0 3 * * *' or @daily")],
    timezone: Annotated[str, typer.Option(help="IANA zone, e.g. Europe/Paris")] = "UTC",
    jitter: Annotated[int, typer.Option(help="spread fires over up to N seconds")] = 0,
    misfire: Annotated[str, typer.Option(help="run_once, skip or all")] = "run_once",
    concurrency: Annotated[str, typer.Option(help="allow, forbid or replace")] = "allow",
    arg: Annotated[list[str] | None, typer.Option(help="replace the job's args")] = None,
    param: Annotated[
        list[str],
        typer.Option(
            help="NAME=VALUE of a parameter the job declares, given to every run it starts "
            "(checked by its type when the schedule is saved); repeatable"
        ),
    ] = [],  # noqa: B006
    paused: Annotated[bool, typer.Option(help="create it paused")] = False,
    name: Annotated[
        str | None, typer.Option(help="unique in the tenant; what herder apply calls it")
    ] = None,
    deadline: DeadlineOption = None,
    deadline_cancel: DeadlineCancelOption = False,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Run a job (by name or id) on a cron schedule."""
    with client() as herder:
        spec: dict[str, Any] = {
            "cron": cron, "timezone": timezone, "jitter_seconds": jitter,
            "misfire_policy": misfire, "concurrency_policy": concurrency, "paused": paused,
            "deadline": deadline_of(deadline, deadline_cancel),
        }  # fmt: skip
        if name is not None:
            spec["name"] = name
        overrides = {"args": arg, "params": pairs(param, "--param") or None}
        spec["overrides"] = {key: value for key, value in overrides.items() if value is not None}
        schedule = herder.create_schedule(job_of(herder, job).id, spec)
        if as_json:
            print_json(schedule)
            return
        if quiet:
            quiet_ids([schedule.id])
            return
        fires = [] if paused else herder.next_fires(schedule.id, CREATED_FIRES_SHOWN)
    if paused:
        out.print(f"created schedule [bold]{schedule.id}[/], paused: it fires once resumed")
        return
    out.print(f"created schedule [bold]{schedule.id}[/]; next fires ({timezone}):")
    for line in _fire_lines(fires):
        out.print(line, highlight=False)


@schedule_app.command("list")
def schedule_list(
    job: Annotated[str | None, typer.Option(help="job name or id")] = None,
    created_by: CreatedByOption = None,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List schedules, newest first."""
    with client() as herder:
        page = herder.list_schedules(
            job_id=job_of(herder, job).id if job else None, created_by=created_by
        )
        if as_json:
            print_json(page)
            return
        if quiet:
            quiet_ids(schedule.id for schedule in page.items)
            return
        names = _target_names(herder, page.items)
    out.print(_schedule_table(page.items, names))


@schedule_app.command("show")
def schedule_show(schedule_id: str, as_json: JsonFlag = False) -> None:
    """A schedule (by name, id or the start of its id), its next fires and its recent
    events."""
    with client() as herder:
        schedule_id = full_id(herder, SCHEDULE, schedule_id)
        schedule = herder.get_schedule(schedule_id)
        fires = herder.next_fires(schedule_id, 5)
        events = herder.schedule_events(schedule_id)
        if as_json:
            print_json(schedule)
            return
        names = _target_names(herder, [schedule])
    deadline = schedule.spec.deadline
    each_fire = (
        None if deadline is None else f"{deadline_words(deadline)} after each fire, local time"
    )
    out.print(
        record_of(
            Text(f"schedule {schedule.name or schedule.id}", style="bold"),
            _schedule_table([schedule], names, whole_ids=True),
            ("next fires", ", ".join(fire["local"] for fire in fires)),
            ("deadline", each_fire),
            ("created by", creator_shown(schedule)),
        )
    )
    recent = events[-20:]
    runs = short_ids(event.run_id for event in recent if event.run_id)
    message = Field("MESSAGE", free=True, wrap=True)
    table = Listing("TIME", "KIND", Field("FOR", drop=1), "RUN", message)
    for event in recent:
        table.add_row(
            when(event.at), event.kind, when(event.scheduled_for), runs.get(event.run_id or "", ""),
            event.message,
        )  # fmt: skip
    out.print(table)


def _is_cron(given: str) -> bool:
    """A cron expression has fields apart (``0 3 * * *``) or is a macro (``@daily``); a
    schedule's name or id has neither."""
    return given.startswith("@") or len(given.split()) > 1


@schedule_app.command("next")
def schedule_next(
    cron_or_id: Annotated[
        str, typer.Argument(help="a schedule (name, id or its start), or a cron expression")
    ],
    timezone: Annotated[str, typer.Option(help="for an expression")] = "UTC",
    count: int = 10,
) -> None:
    """The next fire times, in UTC and in the schedule's zone."""
    with client() as herder:
        if _is_cron(cron_or_id):
            fires = herder.preview_cron(cron_or_id, timezone, count)
        else:
            fires = herder.next_fires(full_id(herder, SCHEDULE, cron_or_id), count)
    for fire in fires:
        out.print(f"{fire['utc']}  {fire['local']}")


@schedule_app.command("pause")
def schedule_pause(schedule_id: str) -> None:
    """Stop firing; nothing is caught up on resume."""
    schedule_id, _ = acted_on(SCHEDULE, schedule_id, HerderClient.pause_schedule)
    out.print(f"paused {schedule_id}")


@schedule_app.command("resume")
def schedule_resume(schedule_id: str) -> None:
    """Resume from now; fires that fell while paused are not caught up."""
    schedule_id, schedule = acted_on(
        SCHEDULE, schedule_id, lambda herder, found: herder.pause_schedule(found, paused=False)
    )
    out.print(f"resumed {schedule_id}; next fire {when(schedule.next_due_at)} UTC")


@schedule_app.command("trigger")
def schedule_trigger(schedule_id: str, quiet: QuietFlag = False) -> None:
    """Fire it now, paused or not, as one of its fires (under its concurrency policy)."""
    schedule_id, fired = acted_on(SCHEDULE, schedule_id, HerderClient.trigger_schedule)
    started = fired.run_id or fired.workflow_run_id or ""
    if quiet:
        quiet_ids([started])
        return
    out.print(f"fired {schedule_id} by hand: started {started}")


@schedule_app.command("delete")
def schedule_delete(schedule_id: str) -> None:
    """Delete a schedule; the runs it made stay."""
    schedule_id, _ = acted_on(SCHEDULE, schedule_id, HerderClient.delete_schedule)
    out.print(f"deleted {schedule_id}")
