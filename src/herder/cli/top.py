"""``herder top``: a live view of the queue, the workers and how runs end, redrawn every few
seconds until Ctrl-C.

read (``Reading``: the last good numbers, and why the latest read failed if it did) →
draw (``frame``: pure, one picture of 80 columns from what was read) → show (a full-screen
``Live``, or one print with ``--once``); or ``--json``: the same numbers as one document
(``top_document``, pure)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any

import httpx
import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from herder.cli.common import JsonFlag, app, client, fail, out
from herder.cli.ids import short_ids
from herder.cli.queue import waited
from herder.cli.tones import state_style
from herder.client import ClientError, HerderClient
from herder.clock import Clock, SystemClock
from herder.domain.models import QueueEntry, Worker
from herder.domain.stats import MinuteOutcomes, ResourceTotals, Stats

CLOCK: Clock = SystemClock()  # what the frame's ages count to; a test sets its own

WINDOW_MINUTES = 60  # the sparkline's minutes, one column each
TABLE_ROWS = 10  # per table, unless the terminal is too short for them
FIXED_LINES = 18  # the frame's lines besides the two tables' rows
NAME_CHARACTERS = 16
BAR_COLUMNS = 12
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Reading:
    """What the server said last time it answered, and why the newest read failed."""

    stats: Stats | None = None
    queue: list[QueueEntry] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    error: str | None = None


def read(herder: HerderClient, last: Reading, rows: int = TABLE_ROWS) -> Reading:
    """A fresh reading; if the server is down or answers badly, the last one with the why."""
    try:
        stats = herder.stats(WINDOW_MINUTES)
        queue = herder.queue(limit=rows).items
        workers = herder.list_workers() if stats.scope == "fleet" else []
    except (ClientError, httpx.HTTPError, ValueError) as error:
        return replace(last, error=str(error) or type(error).__name__)
    return Reading(stats, queue, workers)


# --- drawing (pure) ---


def frame(
    stats: Stats | None,
    queue: list[QueueEntry],
    workers: list[Worker],
    now: datetime,
    *,
    error: str | None = None,
    rows: int = TABLE_ROWS,
) -> RenderableType:
    """One picture: header, queue, workers, footer, each table at most ``rows`` long.
    ``stats`` None: nothing was read yet."""
    parts: list[RenderableType] = []
    if stats is None:
        parts.append(Text("herder top · waiting for the server's first answer", style="bold"))
    else:
        parts += [_header(stats), _throughput(stats.throughput), _resources(stats), ""]
        parts += [_queue(queue[:rows], stats.runs.get("queued", 0)), ""]
        parts += [_workers(stats, workers, now, rows), ""]
    parts.append(_footer(stats, now, error))
    return Group(*parts)


def _header(stats: Stats) -> RenderableType:
    scope = "the fleet" if stats.scope == "fleet" else "your tenant"
    runs = "   ".join(f"{state} [bold]{count}[/]" for state, count in stats.runs.items())
    counts = [Text.from_markup(runs)]
    if stats.workers is not None:  # a line of its own: the run states alone fill 70 columns
        present = [
            f"[{state_style(state)}]{count} {state}[/]"
            for state, count in stats.workers.items()
            if count
        ]
        counts.append(Text.from_markup("workers " + (" ".join(present) or "none")))
    ended = stats.ended
    rate = "-" if stats.failure_rate is None else f"{stats.failure_rate:.1%}"
    return Group(
        Text.from_markup(f"[bold]herder top[/] · {scope}"),
        *counts,
        Text.from_markup(
            f"last {stats.minutes} min: [green]{ended.get('succeeded', 0)} succeeded[/]  "
            f"[red]{ended.get('failed', 0)} failed[/]  {ended.get('cancelled', 0)} cancelled  "
            f"failure rate [bold]{rate}[/]"
        ),
    )


def _ended(minute: MinuteOutcomes) -> int:
    return minute.succeeded + minute.failed + minute.cancelled


def sparkline(series: list[MinuteOutcomes]) -> Text:
    """A block per minute, as high as the runs ended in it against the busiest minute; red
    where some failed."""
    peak = max(map(_ended, series), default=0)
    line = Text()
    for minute in series:
        count = _ended(minute)
        level = math.ceil(count * (len(SPARK_BLOCKS) - 1) / peak) if peak else 0
        style = "red" if minute.failed else "green" if count else "dim"
        line.append(SPARK_BLOCKS[level], style=style)
    return line


def _throughput(series: list[MinuteOutcomes]) -> RenderableType:
    peak = max(map(_ended, series), default=0)
    return Text.assemble("ended/min ", sparkline(series), f" peak {peak}")


def _megabytes(value: float) -> str:
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:g} MB"


def _resources(stats: Stats) -> RenderableType:
    used, capacity = stats.resources.get("used"), stats.resources.get("capacity")
    if used is None:
        return Text("")
    if capacity is None:
        return Text(
            f"in use: cpu {used.cpu:g} · memory {_megabytes(used.memory_mb)} · "
            f"gpus {used.gpus:g} · slots {used.slots:g}"
        )
    grid = Table.grid(padding=(0, 1))
    for _ in range(2):
        grid.add_column(width=6)
        grid.add_column(width=BAR_COLUMNS)
        grid.add_column(width=18, no_wrap=True)
    cells = [_gauge(name, used, capacity) for name in ("cpu", "memory_mb", "gpus", "slots")]
    grid.add_row(*cells[0], *cells[1])
    grid.add_row(*cells[2], *cells[3])
    return grid


def _gauge(
    name: str, used: ResourceTotals, capacity: ResourceTotals
) -> tuple[str, RenderableType, str]:
    have, total = getattr(used, name), getattr(capacity, name)
    show = _megabytes if name == "memory_mb" else "{:g}".format
    bar: RenderableType = ProgressBar(total=total, completed=min(have, total)) if total else ""
    return name.removesuffix("_mb"), bar, f"{show(have)}/{show(total)}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _queue(entries: list[QueueEntry], queued: int) -> RenderableType:
    if not entries:
        return Text("queue: nothing is waiting", style="dim")
    table = Table(
        title=f"queue: first {len(entries)} of {max(queued, len(entries))}",
        title_justify="left", box=None, padding=(0, 1), pad_edge=False,
    )  # fmt: skip
    for heading in ("RUN", "JOB", "PRIORITY", "WAITED"):
        table.add_column(heading, no_wrap=True)
    table.add_column("WAITING REASON")  # the one that gives way: each reason cut to one line
    runs = short_ids(entry.run_id for entry in entries)  # as `herder run show` takes them
    for entry in entries:
        reason = Text(entry.waiting_reason or "-", no_wrap=True, overflow="ellipsis")
        table.add_row(
            runs[entry.run_id], _cut(entry.job_name, NAME_CHARACTERS),
            entry.priority, waited(entry.waited_seconds), reason,
        )  # fmt: skip
    return table


def _workers(stats: Stats, workers: list[Worker], now: datetime, rows: int) -> RenderableType:
    if stats.scope != "fleet":
        return Text("workers: the fleet view needs a system admin key", style="dim")
    if not workers:
        return Text("workers: none registered", style="dim")
    table = Table(
        "WORKER", "STATE", "SLOTS", "CPU", "MEMORY", "GPUS", "HEARTBEAT",
        title=f"workers: {len(workers)}", title_justify="left", box=None, padding=(0, 1),
        pad_edge=False,
    )  # fmt: skip
    for worker in workers[:rows]:
        capacity = worker.capacity
        age = max(0.0, (now - worker.last_heartbeat_at).total_seconds())
        table.add_row(
            Text(_cut(worker.name, NAME_CHARACTERS)),  # any text a worker gave: not markup
            f"[{state_style(worker.state)}]{worker.state}[/]",
            str(worker.max_slots), f"{capacity.cpu:g}", _megabytes(capacity.memory_mb),
            str(capacity.gpus), f"{waited(age)} ago",
        )  # fmt: skip
    if len(workers) > rows:
        table.caption = f"and {len(workers) - rows} more: herder worker list"
        table.caption_justify = "left"
    return table


def _footer(stats: Stats | None, now: datetime, error: str | None) -> RenderableType:
    updated = f"updated {stats.at:%H:%M:%S} UTC" if stats else "not updated yet"
    lines = [Text(updated, style="dim")]
    if error is not None:
        lines.append(Text(f"refresh failed at {now:%H:%M:%S} UTC: {error}; retrying", "red"))
    return Group(*lines)


# --- as JSON (pure) ---


def top_document(
    stats: Stats, queue: list[QueueEntry], workers: list[Worker], now: datetime
) -> Any:
    """What the view shows, as one document of a stable shape (docs/cli.md): ``workers``
    and ``utilization`` are null for a key that does not see the fleet."""
    shown = stats.model_dump(mode="json")
    used, capacity = stats.resources.get("used"), stats.resources.get("capacity")
    return {
        "at": shown["at"], "scope": stats.scope, "window_minutes": stats.minutes,
        "runs": stats.runs,
        "queue": {
            "depth": stats.runs.get("queued", 0),
            "head": [_queued(entry) for entry in queue],
        },
        "ended": stats.ended, "failure_rate": stats.failure_rate,
        "throughput": shown["throughput"], "resources": shown["resources"],
        "utilization": _utilization(used, capacity) if used and capacity else None,
        "workers": {
            "by_state": stats.workers or {},
            "items": [_worker(worker, now) for worker in workers],
        } if stats.scope == "fleet" else None,
    }  # fmt: skip


def _queued(entry: QueueEntry) -> dict[str, Any]:
    return entry.model_dump(
        mode="json", include={"run_id", "job_name", "priority", "waited_seconds", "waiting_reason"}
    )


def _utilization(used: ResourceTotals, capacity: ResourceTotals) -> dict[str, float | None]:
    """Each resource's share in use, 0 to 1 (more when over-committed); null where the
    fleet has none of it."""
    return {
        name: (getattr(used, name) / total if (total := getattr(capacity, name)) else None)
        for name in ResourceTotals.model_fields
    }


def _worker(worker: Worker, now: datetime) -> dict[str, Any]:
    shown = worker.model_dump(
        mode="json",
        include={"id", "name", "state", "max_slots", "capacity", "in_use", "last_heartbeat_at"},
    )
    age = max(0.0, (now - worker.last_heartbeat_at).total_seconds())
    return shown | {"heartbeat_age_seconds": age}


# --- the command ---


@app.command("top")
def top(
    interval: Annotated[
        float, typer.Option(min=0.5, max=60, help="seconds between refreshes")
    ] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="print one view and exit")] = False,
    as_json: JsonFlag = False,
) -> None:
    """A live view of the queue, the workers and the failure rate; Ctrl-C quits. The fleet
    for a system admin's key, your tenant's runs for any other."""
    watching = not once and not as_json
    if watching and not out.is_terminal:
        raise fail("herder top draws on a terminal; give --once to print one view")
    # the live view tries nothing again: it shows why a read failed, and reads at the next
    # refresh, rather than freeze on the last picture for the 30 s of retries
    with client(retry_seconds=0 if watching else None) as herder:
        if as_json:
            _print_json(read(herder, Reading()))
            return
        if once:
            reading = read(herder, Reading())
            out.print(_drawn(reading))
            if reading.error is not None:
                raise typer.Exit(1)
            return
        try:
            _watch(herder, interval)
        except KeyboardInterrupt:
            return


def _print_json(reading: Reading) -> None:
    if reading.stats is None:
        raise fail(f"could not read the server: {reading.error}")
    document = top_document(reading.stats, reading.queue, reading.workers, CLOCK.now())
    out.print_json(json.dumps(document))


def _drawn(reading: Reading, rows: int = TABLE_ROWS) -> RenderableType:
    now = CLOCK.now()
    return frame(reading.stats, reading.queue, reading.workers, now, error=reading.error, rows=rows)


def _watch(herder: HerderClient, interval: float) -> None:
    """Full screen until Ctrl-C; leaving the ``Live`` gives the terminal back as it was."""
    reading = Reading()
    hint = Text(f"every {interval:g}s · Ctrl-C quits", style="dim")
    with Live(console=out, screen=True, auto_refresh=False) as live:
        while True:
            rows = max(1, (out.height - FIXED_LINES) // 2)  # read again: it may be resized
            reading = read(herder, reading, rows)
            live.update(Group(_drawn(reading, rows), hint), refresh=True)
            time.sleep(interval)
