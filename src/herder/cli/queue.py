"""``herder queue``: what waits to run, in dispatch order, and why."""

from __future__ import annotations

from typing import Annotated

import typer

from herder.cli.common import JsonFlag, app, client, out, print_json
from herder.cli.ids import job_of, short_ids
from herder.cli.views import Field, Listing
from herder.domain.models import QueueEntry


def waited(seconds: float) -> str:
    """A duration in its two largest units: 45s, 3m05s, 2h10m, 4d03h."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def needs(entry: QueueEntry) -> str:
    resources = entry.resources
    parts = [f"{resources.cpu:g} cpu", f"{resources.memory_mb} MB"]
    if resources.gpus:
        parts.append(f"{resources.gpus} gpu")
    text = ", ".join(parts)
    if entry.replicas > 1:
        text = f"{entry.replicas} x ({text})"
    if entry.requires:
        text += " on " + ", ".join(f"{key}={value}" for key, value in entry.requires.items())
    return text


def _queue_table(entries: list[QueueEntry]) -> Listing:
    """Queued runs; at 80 columns the tenant, the class and the needs give way, in that
    order, and the reason is cut."""
    runs = short_ids(entry.run_id for entry in entries)
    table = Listing(
        "RUN", "JOB", Field("TENANT", drop=3), Field("PRIORITY", drop=2), Field("NEEDS", drop=1),
        "WAITED", Field("WAITING REASON", free=True),
    )  # fmt: skip
    for entry in entries:
        table.add_row(
            runs[entry.run_id], entry.job_name, entry.tenant_name, entry.priority, needs(entry),
            waited(entry.waited_seconds), entry.waiting_reason or "-",
        )  # fmt: skip
    return table


@app.command("queue")
def queue(
    job: Annotated[str | None, typer.Option(help="only this job's runs (name or id)")] = None,
    limit: Annotated[int, typer.Option(help="at most this many, first to be placed first")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Queued runs, first to be placed first, with why each still waits.

    The system tenant's admins see every tenant's queue; everyone else their tenant's."""
    with client() as herder:
        job_id = job_of(herder, job).id if job else None
        page = herder.queue(job_id=job_id, limit=limit)
    if as_json:
        print_json(page)
        return
    out.print(_queue_table(page.items))
    if page.next_cursor:
        out.print(f"more runs are queued behind these {len(page.items)}; see --limit")
