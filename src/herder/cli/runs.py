"""``herder run …``: start, inspect, cancel, suspend and resume runs."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import typer
from rich.text import Text

from herder.cli.answers import act_on, print_listing
from herder.cli.common import (
    JsonFlag,
    app,
    client,
    new_idempotency_key,
    out,
    pairs,
    print_json,
    seconds_in,
    when,
)
from herder.cli.creators import CreatedByOption, creator_shown
from herder.cli.deadline_options import deadline_line
from herder.cli.ids import RUN, QuietFlag, full_id, job_of, quiet_ids, short_ids
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.jobs import Priority
from herder.domain.models import CheckpointInfo, LogChunk, Page, Run, RunDetail
from herder.domain.states import RunState

run_app = typer.Typer(help="Start, inspect, cancel, suspend and resume runs.", no_args_is_help=True)
app.add_typer(run_app, name="run")


def _ended_well(runs: list[RunDetail]) -> None:
    """``--wait`` ends non-zero unless every run succeeded, so scripts can chain on it."""
    if any(run.state is not RunState.SUCCEEDED for run in runs):
        raise typer.Exit(1)


def _run_table(runs: list[Run], *, ids: bool = True) -> Listing:
    """Runs, each id as its shortest unique start (no id for one run's view, which names it
    whole); at 80 columns the finish, the attempts and the exit code give way, in that
    order."""
    shown = short_ids(run.id for run in runs)
    columns: list[Field | str] = [
        "JOB", "STATE", Field("ATTEMPTS", drop=2), "CREATED", Field("FINISHED", drop=3),
        Field("EXIT", drop=1),
    ]  # fmt: skip
    table = Listing("ID", *columns) if ids else Listing(*columns)
    for run in runs:
        state = f"{run.state} until {when(run.retry_at)}" if run.retry_at else run.state
        cells = [
            run.job_name,
            state,
            str(run.attempt_count),
            when(run.created_at),
            when(run.finished_at),
            "-" if run.exit_code is None else str(run.exit_code),
        ]
        table.add_row(*([shown[run.id]] if ids else []), *cells)
    return table


_BORROWED = "placed past its tenant's share of the pool, it may be reclaimed"


def _print_detail(run: RunDetail) -> None:
    waiting = run.waiting_reason if run.state is RunState.QUEUED else None
    deadline = (
        None if run.deadline_at is None else deadline_line(run.deadline_at, run.deadline_missed_at)
    )
    out.print(
        record_of(
            Text(f"run {run.id}", style="bold"), _run_table([run], ids=False), ("pool", run.pool),
            ("borrowed", _BORROWED if run.borrowed else None), ("waiting", waiting),
            ("reason", run.reason), ("deadline", deadline),
            ("checkpoint", _checkpoint_words(run.checkpoint)),
            ("created by", creator_shown(run)),
        )
    )  # fmt: skip
    if run.attempts:
        workers = short_ids(attempt.worker_id for attempt in run.attempts)
        attempts = Listing(
            "ATTEMPT", "WORKER", "STATE", Field("STOPPED BY", drop=1), "STARTED",
            Field("FINISHED", drop=2), Field("CPU s", drop=3), Field("MAX RSS", drop=4),
        )  # fmt: skip
        for attempt in run.attempts:
            cpu = (attempt.cpu_user_seconds or 0) + (attempt.cpu_system_seconds or 0)
            attempts.add_row(
                f"{attempt.number} borrowed" if attempt.borrowed else str(attempt.number),
                workers[attempt.worker_id],
                attempt.state,
                attempt.stopped_by or "-",
                when(attempt.started_at),
                when(attempt.finished_at),
                f"{cpu:.2f}",
                f"{attempt.max_rss_kb or 0} KB",
            )
        out.print(attempts)
        for attempt in run.attempts:
            if attempt.checkpoint_refused:
                out.print(
                    f"attempt {attempt.number}: checkpoint not saved: {attempt.checkpoint_refused}"
                )
    events = Listing(
        "TIME", "CHANGE", Field("ACTOR", drop=1), Field("MESSAGE", free=True, wrap=True)
    )
    for event in run.events:
        change = f"{event.from_state or ''} → {event.to_state}" if event.to_state else ""
        events.add_row(when(event.at), change, event.actor_name or event.actor, event.message)
    out.print(events)


def _checkpoint_words(saved: CheckpointInfo | None) -> str | None:
    if saved is None:
        return None
    kept = f", kept until {when(saved.expires_at)}" if saved.expires_at else ""
    at = when(saved.saved_at)
    return f"saved by attempt {saved.attempt} at {at}, {saved.stored_bytes} bytes{kept}"


@run_app.command("start")
def run_start(
    job: str,
    param: Annotated[
        list[str],
        typer.Option(help="NAME=VALUE of a parameter the job declares (checked by its type)"),
    ] = [],  # noqa: B006
    arg: Annotated[
        list[str] | None, typer.Option(help="replace the job's args (a developer's)")
    ] = None,
    env: Annotated[list[str], typer.Option(help="KEY=VALUE, merged (a developer's)")] = [],  # noqa: B006
    idempotency_key: Annotated[
        str | None, typer.Option(help="same key, same run (default: a new key)")
    ] = None,
    priority: Annotated[
        Priority | None, typer.Option(help="this run's class, up to the tenant's max_priority")
    ] = None,
    at: Annotated[
        datetime | None,
        typer.Option(
            "--at",
            formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M%z", "%Y-%m-%d %H:%M%z"],
            help="start no earlier than this instant, with its offset (2026-11-29T09:00+01:00)",
        ),
    ] = None,
    after: Annotated[
        str | None, typer.Option("--in", help="start this much later: 90s, 10m, 2h, 1d")
    ] = None,
    wait: Annotated[
        bool, typer.Option(help="wait for the run to end, then print its output and show it")
    ] = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="print its output as it comes, then show how it ended"),
    ] = False,
    count: Annotated[
        int, typer.Option(min=1, max=100_000, help="start this many runs (in batches)")
    ] = 1,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Start a one-off run of a job (by name or id). An operator key sets only the job's
    declared parameters (--param); --arg and --env need a developer key. With -q, only the
    runs' ids: 'herder run start JOB -q | xargs herder run cancel'."""
    params = pairs(param, "--param") or None  # as text: the job's declaration types it
    if count > 1:
        if idempotency_key is not None:
            raise typer.BadParameter("one key names one run", param_hint="--idempotency-key")
        if priority is not None or at is not None or after is not None:
            raise typer.BadParameter("one run at a time", param_hint="--priority, --at, --in")
        overrides = _Overrides(params, arg, pairs(env, "env") or None)
        _start_many(job, count, overrides, wait=wait or follow, as_json=as_json, quiet=quiet)
        return
    with client() as herder:
        run: Run = herder.start_run(
            job_of(herder, job).id,
            params=params,
            args=arg,
            env=pairs(env, "env") or None,
            idempotency_key=idempotency_key or new_idempotency_key(),
            priority=priority,
            run_at=at,
            delay_seconds=None if after is None else seconds_in(after),
        )
        printed = not (as_json or quiet)  # the output goes with the view, not -q or --json
        if follow and printed:
            _write_output(herder.follow_logs(run.id))
        if wait or follow:
            run = herder.wait(run.id, timeout=25 * 3600)
        if wait and not follow and printed:
            _write_output(herder.follow_logs(run.id))  # an ended run's: every page, at once
    if as_json:
        print_json(run)
    elif quiet:
        quiet_ids([run.id])
    elif isinstance(run, RunDetail):
        _print_detail(run)
    elif run.state is RunState.SCHEDULED and run.run_at is not None:
        out.print(f"run [bold]{run.id}[/] of {run.job_name} starts at {when(run.run_at)}")
    else:
        out.print(f"started run [bold]{run.id}[/] of {run.job_name} ({run.state})")
    if isinstance(run, RunDetail):
        _ended_well([run])


def _write_output(chunks: Iterable[LogChunk]) -> None:
    """A run's output as it printed it: stdout to stdout, stderr to stderr, in order."""
    for chunk in chunks:
        stream = sys.stderr if chunk.stream == "stderr" else sys.stdout
        stream.write(chunk.text)
        stream.flush()


@dataclass(frozen=True)
class _Overrides:
    params: dict[str, str] | None
    args: list[str] | None
    env: dict[str, str] | None


def _start_many(
    job: str, count: int, overrides: _Overrides, *, wait: bool, as_json: bool, quiet: bool
) -> None:
    with client() as herder:
        job_id = job_of(herder, job).id
        run_ids = herder.start_runs(
            job_id,
            count,
            params=overrides.params,
            args=overrides.args,
            env=overrides.env,
            idempotency_prefix=new_idempotency_key(),
        )
        ended = [herder.wait(run_id, timeout=25 * 3600) for run_id in run_ids] if wait else []
    if as_json and ended:
        print_json(list(ended))
    elif as_json:
        out.print_json(json.dumps(run_ids))
    elif quiet:
        quiet_ids(run_ids)
    elif ended:
        tally = Counter(str(run.state) for run in ended)
        out.print(f"{count} runs of {job}: " + ", ".join(f"{n} {s}" for s, n in tally.items()))
    else:
        out.print(f"started {count} runs of {job}: [bold]{run_ids[0]}[/] … {run_ids[-1]}")
    _ended_well(ended)


STATES_HELP = "repeatable: " + ", ".join(RunState)
CREATOR_READS = 20  # pages a listing by creator follows at most (each reads ≤ 10,000 runs)


@run_app.command("list")
def run_list(
    job: Annotated[str | None, typer.Option(help="job name or id")] = None,
    state: Annotated[list[str], typer.Option(help=STATES_HELP)] = [],  # noqa: B006
    dead: Annotated[bool, typer.Option("--dead", help="the dead-letter set")] = False,
    created_by: CreatedByOption = None,
    limit: int = 50,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List runs, newest first."""
    state = [*state, RunState.DEAD] if dead else state
    with client() as herder:
        job_id = job_of(herder, job).id if job else None
        page = herder.list_runs(job_id=job_id, states=state, created_by=created_by, limit=limit)
        items, reads = list(page.items), 1
        # a creator's pages each read a bounded number of runs (docs/api.md "Who made it"):
        # short ones are followed until the listing is full, within a bound of reads
        while page.next_cursor and len(items) < limit and reads < CREATOR_READS:
            page = herder.list_runs(
                job_id=job_id, states=state, created_by=created_by,
                limit=limit - len(items), cursor=page.next_cursor,
            )  # fmt: skip
            items, reads = items + page.items, reads + 1
    print_listing(
        Page(items=items, next_cursor=page.next_cursor), _run_table, as_json=as_json, quiet=quiet
    )


@run_app.command("show")
def run_show(run_id: str, as_json: JsonFlag = False) -> None:
    """A run with its attempts and its timeline of events."""
    with client() as herder:
        run_id = full_id(herder, RUN, run_id)
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
        run_id = full_id(herder, RUN, run_id)
        if follow:
            _write_output(herder.follow_logs(run_id, attempt=attempt))
        else:
            _write_output(herder.logs_so_far(run_id, attempt=attempt))


def _is_now(run: Run) -> str:
    return f"run {run.id} is {run.state}"


def _stopping(doing: str) -> Callable[[Run], str]:
    """What a cancel or suspend says: a running run is stopped by its worker."""

    def said(run: Run) -> str:
        if run.state is RunState.RUNNING:
            return f"{doing} run {run.id}: its worker is stopping it"
        return _is_now(run)

    return said


def _rerun_said(run: Run) -> str:
    return f"started run [bold]{run.id}[/], a re-run of {run.rerun_of}"


@run_app.command("rerun")
def run_rerun(run_id: str, as_json: JsonFlag = False) -> None:
    """Run an ended (say, dead) run again, as a new run linked to it."""
    act_on(RUN, run_id, HerderClient.rerun, _rerun_said, as_json=as_json)


@run_app.command("cancel")
def run_cancel(run_id: str, as_json: JsonFlag = False) -> None:
    """Cancel a run: at once if queued; a running one is killed by its worker."""
    act_on(RUN, run_id, HerderClient.cancel_run, _stopping("cancelling"), as_json=as_json)


@run_app.command("suspend")
def run_suspend(run_id: str, as_json: JsonFlag = False) -> None:
    """Hold a run until resumed: at once if waiting; a running one is stopped by its worker
    as a preemption (its stop grace, its checkpoint saved)."""
    act_on(RUN, run_id, HerderClient.suspend_run, _stopping("suspending"), as_json=as_json)


@run_app.command("priority")
def run_priority(run_id: str, priority: Priority, as_json: JsonFlag = False) -> None:
    """Move a run not started yet to another class (it keeps its place in time)."""
    act_on(
        RUN, run_id, lambda herder, found: herder.set_run_priority(found, priority),
        lambda run: f"run {run.id} is {run.spec.priority} priority ({run.state})", as_json=as_json,
    )  # fmt: skip


@run_app.command("resume")
def run_resume(run_id: str, as_json: JsonFlag = False) -> None:
    """Queue a suspended run again (held pending while the tenant is at max_queued)."""
    act_on(RUN, run_id, HerderClient.resume_run, _is_now, as_json=as_json)
