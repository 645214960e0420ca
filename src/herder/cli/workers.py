"""``herder workers …``: the fleet, and draining a worker for maintenance (system admins).

A group of its own because ``herder worker [options]`` runs a worker agent.
"""

from __future__ import annotations

import typer
from rich.table import Table

from herder.cli.common import JsonFlag, app, client, out, print_json, when
from herder.domain.models import Worker, WorkerState

workers_app = typer.Typer(help="List the fleet; drain and undrain workers.", no_args_is_help=True)
app.add_typer(workers_app, name="workers")

_STATE_STYLE = {WorkerState.ALIVE: "green", WorkerState.DRAINING: "yellow", WorkerState.LOST: "red"}


def _worker_table(workers: list[Worker]) -> Table:
    table = Table("ID", "NAME", "STATE", "CPU", "MEMORY", "GPUS", "SLOTS", "LABELS", "HEARTBEAT")
    for worker in workers:
        capacity = worker.capacity
        labels = ", ".join(f"{key}={value}" for key, value in sorted(worker.labels.items()))
        style = _STATE_STYLE.get(worker.state, "")
        table.add_row(
            worker.id, worker.name, f"[{style}]{worker.state}[/]", f"{capacity.cpu:g}",
            f"{capacity.memory_mb} MB", str(capacity.gpus), str(worker.max_slots),
            labels or "-", when(worker.last_heartbeat_at),
        )  # fmt: skip
    return table


@workers_app.command("list")
def workers_list(as_json: JsonFlag = False) -> None:
    """Every registered worker with its state, capacity and labels."""
    with client() as herder:
        workers = herder.list_workers()
    if as_json:
        print_json(list(workers))
    else:
        out.print(_worker_table(workers))


@workers_app.command("drain")
def workers_drain(worker_id: str, as_json: JsonFlag = False) -> None:
    """Place nothing new on a worker; what it runs finishes."""
    with client() as herder:
        worker = herder.drain_worker(worker_id)
    if as_json:
        print_json(worker)
    else:
        out.print(f"worker {worker.id} ({worker.name}) is {worker.state}: it takes no new work")


@workers_app.command("undrain")
def workers_undrain(worker_id: str, as_json: JsonFlag = False) -> None:
    """Give a draining worker new work again."""
    with client() as herder:
        worker = herder.undrain_worker(worker_id)
    if as_json:
        print_json(worker)
    else:
        out.print(f"worker {worker.id} ({worker.name}) is {worker.state}: it takes new work")
