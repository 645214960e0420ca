"""The ``herder`` command: run the system (up, server, worker) and drive it (job, run)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from herder.client import ClientError, HerderClient
from herder.credentials import ClientCredentials, home_directory
from herder.domain.models import Job, Run, RunDetail, Schedule
from herder.settings import Settings

app = typer.Typer(
    help="Herder: run uploaded programs once, on a schedule or as DAG steps, on a fleet.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
job_app = typer.Typer(help="Create and manage jobs.", no_args_is_help=True)
run_app = typer.Typer(help="Start, inspect and cancel runs.", no_args_is_help=True)
app.add_typer(job_app, name="job")
schedule_app = typer.Typer(help="Run jobs on a cron schedule.", no_args_is_help=True)
app.add_typer(run_app, name="run")
app.add_typer(schedule_app, name="schedule")

LOG_FORMAT = "%(asctime)s {role} %(levelname)s %(message)s"
out = Console()
err = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]
HomeOption = Annotated[
    Path | None, typer.Option("--home", help="data directory (default $HERDER_HOME or ./.herder)")
]


def fail(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(1)


def client() -> HerderClient:
    credentials = ClientCredentials.load()
    if credentials is None:
        raise fail(
            f"no server configured: run 'herder up', or set HERDER_URL and HERDER_API_KEY "
            f"(looked in {home_directory() / 'client.json'})"
        )
    return HerderClient(credentials.url, credentials.api_key)


def print_json(value: BaseModel | list[BaseModel]) -> None:
    if isinstance(value, list):
        out.print_json(json.dumps([item.model_dump(mode="json") for item in value]))
    else:
        out.print_json(value.model_dump_json())


def pairs(items: list[str], what: str) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise fail(f"{what} {item!r} must look like KEY=VALUE")
        result[key] = value
    return result


def _when(moment: object) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if hasattr(moment, "strftime") else "-"


# --- running the system ------------------------------------------------------------------


def _check_port_free(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise fail(f"cannot listen on {host}:{port}: {error.strerror}; try --port") from error


@app.command()
def up(
    home: HomeOption = None,
    port: Annotated[int | None, typer.Option(help="API port (default 8080)")] = None,
) -> None:
    """Run the whole system here: API, store (SQLite) and a local worker. Ctrl-C stops it."""
    from herder.server import prepare, serve

    settings = Settings.from_environment(home=home, port=port)
    _check_port_free(settings.host, settings.port)
    prepared = prepare(settings)
    out.print(f"Herder is up at [bold]{settings.url}[/] (dashboard and API; docs at /docs)")
    out.print(f"Admin key saved to {prepared.client_file} (mode 0600); the CLI finds it there.")
    if prepared.new_admin_key:
        out.print("A default tenant and its admin key were created on this first start.")
    out.print("Press Ctrl-C to stop.")
    serve(settings, prepared, with_worker=True, with_scheduler=True)


@app.command()
def server(
    home: HomeOption = None,
    host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default 8080)")] = None,
    with_scheduler: Annotated[
        bool, typer.Option(help="also run the control loops here (else: herder scheduler)")
    ] = False,
) -> None:
    """Run an API server (no worker). Point HERDER_DATABASE_URL at PostgreSQL to scale out."""
    from herder.server import prepare, serve

    settings = Settings.from_environment(home=home, host=host, port=port)
    _check_port_free(settings.host, settings.port)
    prepared = prepare(settings)
    out.print(f"Herder API listening on {settings.url}; admin key in {prepared.client_file}")
    serve(settings, prepared, with_worker=False, with_scheduler=with_scheduler)


@app.command()
def scheduler(home: HomeOption = None) -> None:
    """Run the control loops (reaper, …) under leases; run several for high availability."""
    import logging

    from herder.server import start_scheduler
    from herder.store.store import Store

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s scheduler %(levelname)s %(message)s"
    )
    settings = Settings.from_environment(home=home)
    store = Store(settings.database_url)
    store.migrate()
    running = start_scheduler(settings, store, listen=True)
    out.print(f"Herder scheduler {running.holder} running against {store.database.dialect}")
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: running.stop())
    running.wait()
    store.close()


@app.command()
def worker(
    server_url: Annotated[str, typer.Option("--server", help="API URL, e.g. http://host:8080")],
    token: Annotated[
        str | None, typer.Option(envvar="HERDER_WORKER_TOKEN", help="worker token")
    ] = None,
    name: Annotated[str | None, typer.Option(help="default: the host name")] = None,
    cpu: Annotated[float | None, typer.Option(help="cores to offer (default: all)")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="memory to offer (default: all)")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs to offer (default: detected)")] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    max_slots: Annotated[int, typer.Option(help="most attempts at once")] = 256,
    home: Annotated[Path | None, typer.Option(help="cache and workspaces")] = None,
    run_uid_base: Annotated[
        int, typer.Option(help="when root: attempts run as uids from here up")
    ] = 61000,
    python: Annotated[str | None, typer.Option(help="interpreter for python jobs")] = None,
    kill_grace: Annotated[float, typer.Option(help="seconds between SIGTERM and SIGKILL")] = 5.0,
) -> None:
    """Run a worker agent that takes attempts from a Herder server."""
    import logging

    from herder.worker.agent import Agent, WorkerConfig
    from herder.worker.capacity import detect_capacity
    from herder.worker.uids import default_python

    if not token:
        raise fail("a worker token is needed: --token or HERDER_WORKER_TOKEN")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT.format(role="worker"))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = WorkerConfig(
        server_url=server_url,
        token=token,
        name=name or socket.gethostname(),
        capacity=detect_capacity(cpu, memory_mb, gpus),
        home=(home or home_directory() / "worker").absolute(),
        python=python or default_python(),
        max_slots=max_slots,
        labels=pairs(label, "label"),
        run_uid_base=run_uid_base,
        kill_grace_seconds=kill_grace,
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await Agent(config).run(stop)

    asyncio.run(main())


# --- jobs ----------------------------------------------------------------------------------

_RUNTIME_BY_SUFFIX = {".py": "python", ".zip": "archive", ".tgz": "archive", ".gz": "archive"}


def _job_table(jobs: list[Job]) -> Table:
    table = Table("ID", "NAME", "RUNTIME", "CPU", "MEMORY", "PRIORITY", "UPDATED")
    for job in jobs:
        spec = job.spec
        table.add_row(
            job.id,
            job.name,
            spec.runtime,
            f"{spec.resources.cpu:g}",
            f"{spec.resources.memory_mb} MB",
            spec.priority,
            _when(job.updated_at),
        )
    return table


@job_app.command("create")
def job_create(
    name: str,
    runtime: Annotated[
        str | None, typer.Option(help="shell, python, executable or archive (default: guessed)")
    ] = None,
    command: Annotated[str | None, typer.Option(help="shell command (shell, archive)")] = None,
    file: Annotated[Path | None, typer.Option(help="program to upload (≤ 10 MB)")] = None,
    arg: Annotated[list[str], typer.Option(help="argument, repeatable")] = [],  # noqa: B006
    env: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    cpu: Annotated[float, typer.Option(help="cores (fractions allowed)")] = 1.0,
    memory_mb: Annotated[int, typer.Option(help="memory in MB")] = 256,
    gpus: Annotated[int, typer.Option()] = 0,
    priority: Annotated[str, typer.Option(help="high, medium or low")] = "medium",
    timeout: Annotated[int, typer.Option(help="seconds, at most 86400")] = 3600,
    max_attempts: Annotated[int, typer.Option(help="retry policy: attempts in all")] = 1,
    retry_delay: Annotated[float, typer.Option(help="first back-off cap, seconds")] = 10.0,
    network: Annotated[bool, typer.Option(help="allow network access")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a job. With --file the program is uploaded first."""
    with client() as herder:
        spec: dict[str, Any] = {
            "args": arg,
            "env": pairs(env, "env"),
            "labels": pairs(label, "label"),
            "resources": {"cpu": cpu, "memory_mb": memory_mb, "gpus": gpus},
            "priority": priority,
            "timeout_seconds": timeout,
            "retry": {"max_attempts": max_attempts, "initial_delay_seconds": retry_delay},
            "network": network,
        }
        if file is not None:
            if not file.is_file():
                raise fail(f"{file} is not a file")
            spec["artifact"] = herder.upload_artifact(file).id
            runtime = runtime or _RUNTIME_BY_SUFFIX.get(file.suffix, "executable")
        spec["runtime"] = runtime or "shell"
        if command is not None:
            spec["command"] = command
        job = herder.create_job(name, spec)
    if as_json:
        print_json(job)
    else:
        out.print(f"created job [bold]{job.name}[/] ({job.id})")


@job_app.command("list")
def job_list(
    name: Annotated[str | None, typer.Option()] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE filter")] = [],  # noqa: B006
    limit: int = 100,
    as_json: JsonFlag = False,
) -> None:
    """List jobs, newest first."""
    with client() as herder:
        page = herder.list_jobs(name=name, labels=pairs(label, "label"), limit=limit)
    if as_json:
        print_json(page)
    else:
        out.print(_job_table(page.items))


@job_app.command("show")
def job_show(job: str, as_json: JsonFlag = False) -> None:
    """Show a job (by name or id)."""
    with client() as herder:
        found = herder.find_job(job)
    if as_json:
        print_json(found)
    else:
        out.print(_job_table([found]))
        out.print_json(found.spec.model_dump_json())


@job_app.command("update")
def job_update(
    job: str,
    set_: Annotated[
        list[str], typer.Option("--set", help="FIELD=JSON-VALUE, e.g. timeout_seconds=60")
    ],
    as_json: JsonFlag = False,
) -> None:
    """Change fields of a job; runs already submitted keep their spec."""
    changes: dict[str, Any] = {}
    for field, raw in pairs(set_, "--set").items():
        try:
            changes[field] = json.loads(raw)
        except json.JSONDecodeError:
            changes[field] = raw
    with client() as herder:
        updated = herder.update_job(herder.find_job(job).id, changes)
    if as_json:
        print_json(updated)
    else:
        out.print(f"updated job [bold]{updated.name}[/] ({updated.id})")


@job_app.command("delete")
def job_delete(job: str) -> None:
    """Delete a job definition; its run history stays."""
    with client() as herder:
        found = herder.find_job(job)
        herder.delete_job(found.id)
    out.print(f"deleted job {found.name} ({found.id})")


# --- runs ----------------------------------------------------------------------------------


def _run_table(runs: list[Run]) -> Table:
    table = Table("ID", "JOB", "STATE", "ATTEMPTS", "CREATED", "FINISHED", "EXIT")
    for run in runs:
        state = f"{run.state} until {_when(run.retry_at)}" if run.retry_at else run.state
        table.add_row(
            run.id,
            run.job_name,
            state,
            str(run.attempt_count),
            _when(run.created_at),
            _when(run.finished_at),
            "-" if run.exit_code is None else str(run.exit_code),
        )
    return table


def _print_detail(run: RunDetail) -> None:
    out.print(_run_table([run]))
    if run.reason:
        out.print(f"reason: {run.reason}")
    if run.attempts:
        attempts = Table("ATTEMPT", "WORKER", "STATE", "STARTED", "FINISHED", "CPU s", "MAX RSS")
        for attempt in run.attempts:
            cpu = (attempt.cpu_user_seconds or 0) + (attempt.cpu_system_seconds or 0)
            attempts.add_row(
                str(attempt.number),
                attempt.worker_id,
                attempt.state,
                _when(attempt.started_at),
                _when(attempt.finished_at),
                f"{cpu:.2f}",
                f"{attempt.max_rss_kb or 0} KB",
            )
        out.print(attempts)
    events = Table("TIME", "CHANGE", "ACTOR", "MESSAGE")
    for event in run.events:
        change = f"{event.from_state or ''} → {event.to_state}" if event.to_state else ""
        events.add_row(_when(event.at), change, event.actor, event.message)
    out.print(events)


@run_app.command("start")
def run_start(
    job: str,
    arg: Annotated[list[str] | None, typer.Option(help="replace the job's args")] = None,
    env: Annotated[list[str], typer.Option(help="KEY=VALUE, merged")] = [],  # noqa: B006
    idempotency_key: Annotated[str | None, typer.Option(help="same key, same run")] = None,
    wait: Annotated[bool, typer.Option(help="wait for the run to end, then show it")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Start a one-off run of a job (by name or id)."""
    with client() as herder:
        run: Run = herder.start_run(
            herder.find_job(job).id,
            args=arg,
            env=pairs(env, "env") or None,
            idempotency_key=idempotency_key,
        )
        if wait:
            run = herder.wait(run.id, timeout=25 * 3600)
    if as_json:
        print_json(run)
    elif isinstance(run, RunDetail):
        _print_detail(run)
    else:
        out.print(f"started run [bold]{run.id}[/] of {run.job_name} ({run.state})")


@run_app.command("list")
def run_list(
    job: Annotated[str | None, typer.Option(help="job name or id")] = None,
    state: Annotated[list[str], typer.Option(help="repeatable")] = [],  # noqa: B006
    dead: Annotated[bool, typer.Option("--dead", help="the dead-letter set")] = False,
    limit: int = 50,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first."""
    state = [*state, "dead"] if dead else state
    with client() as herder:
        job_id = herder.find_job(job).id if job else None
        page = herder.list_runs(job_id=job_id, states=state, limit=limit)
    if as_json:
        print_json(page)
    else:
        out.print(_run_table(page.items))


@run_app.command("show")
def run_show(run_id: str, as_json: JsonFlag = False) -> None:
    """A run with its attempts and its timeline of events."""
    with client() as herder:
        run = herder.get_run(run_id)
    if as_json:
        print_json(run)
    else:
        _print_detail(run)


@run_app.command("logs")
def run_logs(
    run_id: str,
    attempt: Annotated[int | None, typer.Option(help="default: the newest")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream until it ends")] = False,
) -> None:
    """Print a run's output (stdout and stderr, in order)."""
    with client() as herder:
        if follow:
            chunks = herder.follow_logs(run_id, attempt=attempt)
        else:
            chunks = iter(herder.logs(run_id, attempt=attempt).chunks)
        for chunk in chunks:
            stream = sys.stderr if chunk.stream == "stderr" else sys.stdout
            stream.write(chunk.text)
            stream.flush()


@run_app.command("rerun")
def run_rerun(run_id: str, as_json: JsonFlag = False) -> None:
    """Run an ended (say, dead) run again, as a new run linked to it."""
    with client() as herder:
        run = herder.rerun(run_id)
    if as_json:
        print_json(run)
    else:
        out.print(f"started run [bold]{run.id}[/], a re-run of {run_id}")


@run_app.command("cancel")
def run_cancel(run_id: str, as_json: JsonFlag = False) -> None:
    """Cancel a run: at once if queued; a running one is killed by its worker."""
    with client() as herder:
        run = herder.cancel_run(run_id)
    if as_json:
        print_json(run)
    elif run.state == "running":
        out.print(f"cancelling run {run.id}: its worker is stopping it")
    else:
        out.print(f"run {run.id} is {run.state}")


# --- schedules -----------------------------------------------------------------------------


def _schedule_table(items: list[Schedule]) -> Table:
    table = Table("ID", "JOB", "CRON", "ZONE", "NEXT (UTC)", "STATE", "FIRED", "MISSED")
    for schedule in items:
        spec = schedule.spec
        table.add_row(
            schedule.id, schedule.job_id, spec.cron, spec.timezone,
            _when(schedule.next_due_at), "paused" if schedule.paused else "active",
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
    as_json: JsonFlag = False,
) -> None:
    """Run a job (by name or id) on a cron schedule."""
    with client() as herder:
        spec: dict[str, Any] = {
            "cron": cron, "timezone": timezone, "jitter_seconds": jitter,
            "misfire_policy": misfire, "concurrency_policy": concurrency, "paused": paused,
        }  # fmt: skip
        if arg is not None:
            spec["overrides"] = {"args": arg}
        schedule = herder.create_schedule(herder.find_job(job).id, spec)
    if as_json:
        print_json(schedule)
    else:
        next_due = _when(schedule.next_due_at)
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
            _when(event.at), event.kind, _when(event.scheduled_for), event.run_id or "",
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
    out.print(f"resumed {schedule_id}; next fire {_when(schedule.next_due_at)} UTC")


@schedule_app.command("delete")
def schedule_delete(schedule_id: str) -> None:
    """Delete a schedule; the runs it made stay."""
    with client() as herder:
        herder.delete_schedule(schedule_id)
    out.print(f"deleted {schedule_id}")


def main() -> None:
    try:
        app()
    except ClientError as error:
        err.print(f"[bold red]error:[/] {error}", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
