"""``herder schedule …``: run jobs on a cron schedule."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from herder.cli.common import JsonFlag, app, client, out, print_json, when
from herder.domain.models import Schedule

schedule_app = typer.Typer(help="Run jobs on a cron schedule.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")


def _schedule_table(items: list[Schedule]) -> Table:
    table = Table("ID", "NAME", "JOB", "CRON", "ZONE", "NEXT (UTC)", "STATE", "FIRED", "MISSED")
    for schedule in items:
        spec = schedule.spec
        table.add_row(
            schedule.id, schedule.name or "", schedule.job_id, spec.cron, spec.timezone,
            when(schedule.next_due_at), "paused" if schedule.paused else "active",
            str(schedule.fired_count), str(schedule.missed_count),
        )  # fmt: skip
    return table


@schedule_app.command("create")
def schedule_create(
    job: str,
    cron: Annotated[str, typer.Argument(help="e.g. '0 3 * * *' or @daily")],
    timezone: Annotated[str, typer.Option(help="IANA zone, e.g. Europe/Paris")] = "UTC",
    jitter: Annotated[int, typer.Option(help="spread fires over up to N seconds")] = 0,
    misfire: Annotated[str, typer.Option(help="run_once, skip or all")] = "run_once",
    concurrency: Annotated[str, typer.Option(help="allow, forbid or replace")] = "allow",
    arg: Annotated[list[str] | None, typer.Option(help="replace the job's args")] = None,
    paused: Annotated[bool, typer.Option(help="create it paused")] = False,
    name: Annotated[
        str | None, typer.Option(help="unique in the tenant; what herder apply calls it")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run a job (by name or id) on a cron schedule."""
    with client() as herder:
        spec: dict[str, Any] = {
            "cron": cron, "timezone": timezone, "jitter_seconds": jitter,
            "misfire_policy": misfire, "concurrency_policy": concurrency, "paused": paused,
        }  # fmt: skip
        if name is not None:
            spec["name"] = name
        if arg is not None:
            spec["overrides"] = {"args": arg}
        schedule = herder.create_schedule(herder.find_job(job).id, spec)
    if as_json:
        print_json(schedule)
    else:
        next_due = when(schedule.next_due_at)
        out.print(f"created schedule [bold]{schedule.id}[/]; next fire {next_due} UTC")


@schedule_app.command("list")
def schedule_list(
    job: Annotated[str | None, typer.Option(help="job name or id")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List schedules, newest first."""
    with client() as herder:
        page = herder.list_schedules(job_id=herder.find_job(job).id if job else None)
    if as_json:
        print_json(page)
    else:
        out.print(_schedule_table(page.items))


@schedule_app.command("show")
def schedule_show(schedule_id: str, as_json: JsonFlag = False) -> None:
    """A schedule, its next fires and its recent events."""
    with client() as herder:
        schedule = herder.get_schedule(schedule_id)
        fires = herder.next_fires(schedule_id, 5)
        events = herder.schedule_events(schedule_id)
    if as_json:
        print_json(schedule)
        return
    out.print(_schedule_table([schedule]))
    out.print("next fires: " + ", ".join(fire["local"] for fire in fires))
    table = Table("TIME", "KIND", "FOR", "RUN", "MESSAGE")
    for event in events[-20:]:
        table.add_row(
            when(event.at), event.kind, when(event.scheduled_for), event.run_id or "",
            event.message,
        )  # fmt: skip
    out.print(table)


@schedule_app.command("next")
def schedule_next(
    cron_or_id: Annotated[str, typer.Argument(help="a schedule id, or a cron expression")],
    timezone: Annotated[str, typer.Option(help="for an expression")] = "UTC",
    count: int = 10,
) -> None:
    """The next fire times, in UTC and in the schedule's zone."""
    with client() as herder:
        if cron_or_id.startswith("sch_"):
            fires = herder.next_fires(cron_or_id, count)
        else:
            fires = herder.preview_cron(cron_or_id, timezone, count)
    for fire in fires:
        out.print(f"{fire['utc']}  {fire['local']}")


@schedule_app.command("pause")
def schedule_pause(schedule_id: str) -> None:
    """Stop firing; nothing is caught up on resume."""
    with client() as herder:
        herder.pause_schedule(schedule_id)
    out.print(f"paused {schedule_id}")


@schedule_app.command("resume")
def schedule_resume(schedule_id: str) -> None:
    """Resume from now; fires that fell while paused are not caught up."""
    with client() as herder:
        schedule = herder.pause_schedule(schedule_id, paused=False)
    out.print(f"resumed {schedule_id}; next fire {when(schedule.next_due_at)} UTC")


@schedule_app.command("delete")
def schedule_delete(schedule_id: str) -> None:
    """Delete a schedule; the runs it made stay."""
    with client() as herder:
        herder.delete_schedule(schedule_id)
    out.print(f"deleted {schedule_id}")
