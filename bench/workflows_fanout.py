"""Scenario: the workflows scenario's fan-out alone, to see where its time goes — a fan-out of
``FAN_OUT`` instances of ``true`` (``map_over: params.items``) joined by one ``all_success``
task, on one ``herder server --with-scheduler`` and one worker (as ``bench/workflows.py``),
PostgreSQL only, ``--repeats`` times on one system. For each: the instances' queued, placed,
delivered and finished instants (p0/p25/p50/p75/p100 from the workflow run's ``created_at``),
the join's, and the CPU seconds the server, the worker (with its jobs) and the database's
backends spent. Nothing is appended to bench/RESULTS.md: it is for A/B runs of a change.

    python -m bench.workflows_fanout [--repeats 3] [--isolation none|sandbox]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench import workflows
from bench.oneoff import Herder
from bench.run import WORK, drop_postgres, fresh_postgres
from herder.client import HerderClient
from herder.store.database import Database
from herder.store.schema import attempts, runs, workflow_runs
from herder.worker.isolation import Isolation

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--isolation", choices=[i.value for i in Isolation], default="none")
    options = parser.parse_args()
    home = WORK / "workflows-fanout"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    url = fresh_postgres()
    database = Database(url)
    try:
        with Herder(home, url, Isolation(options.isolation)) as herder, herder.client() as client:
            job = client.create_job("fan-out", workflows._job("true", workflows.FAN_OUT_CPU))
            client.wait(client.start_run(job.id).id, timeout=30)  # warm
            for repeat in range(options.repeats):
                before = _cpu(herder, url)
                workflow_run_id = _fan_out(client, f"fan-out-{repeat}")
                after = _cpu(herder, url)
                print(f"fan-out {repeat + 1} of {options.repeats}:")
                for line in _timeline(database, workflow_run_id):
                    print("  " + line)
                spent = ", ".join(f"{name} {after[name] - before[name]:.2f}" for name in after)
                print(f"  CPU seconds: {spent}", flush=True)
    finally:
        database.dispose()
        shutil.rmtree(home, ignore_errors=True)
        drop_postgres()


def _fan_out(client: HerderClient, name: str) -> str:
    workflow = client.create_workflow(
        {
            "name": name,
            "params": {"items": []},
            "tasks": [
                {"name": "each", "job": "fan-out", "map_over": "params.items"},
                {"name": "join", "job": "fan-out", "depends_on": ["each"]},
            ],
        }
    )
    items = {"items": list(range(workflows.FAN_OUT))}
    detail, _ = workflows._run(client, workflow.id, items, workflows.FAN_OUT_POLL_SECONDS)
    return detail.id


def _timeline(database: Database, workflow_run_id: str) -> list[str]:
    with database.read() as connection:
        created = connection.execute(
            select(workflow_runs.c.created_at).where(workflow_runs.c.id == workflow_run_id)
        ).scalar_one()
        found = connection.execute(
            select(
                runs.c.task_name,
                runs.c.queued_at,
                runs.c.started_at,
                attempts.c.delivered_at,
                runs.c.finished_at,
            )
            .join(attempts, attempts.c.run_id == runs.c.id)
            .where(runs.c.workflow_run_id == workflow_run_id)
        ).all()
    lines = []
    for column, stage in enumerate(("queued", "placed", "delivered", "finished"), start=1):
        instants = [row[column] for row in found if row.task_name == "each"]
        lines.append(f"instances {stage:9} {_quantiles(created, instants)}")
    (join,) = [row for row in found if row.task_name == "join"]
    lines.append(f"join queued, placed, delivered, finished: {_quantiles(created, join[1:])}")
    return lines


def _quantiles(start: datetime, instants: Any) -> str:
    seconds = sorted((instant - start).total_seconds() for instant in instants if instant)
    if len(seconds) <= 4:
        return " ".join(f"{value:.2f}" for value in seconds) + " s"
    picked = [seconds[round(q * (len(seconds) - 1))] for q in QUANTILES]
    return "p0/25/50/75/100 " + " ".join(f"{value:.2f}" for value in picked) + " s"


def _cpu(herder: Herder, url: str) -> dict[str, float]:
    """CPU seconds so far: the server's, the worker's with its jobs (those it waited for),
    and the database's backends for this database (those alive now)."""
    database = url.rsplit("/", 1)[1]
    backends = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-d", "test", "-Atc",
         f"SELECT pid FROM pg_stat_activity WHERE datname = '{database}'"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    server, worker = herder.processes[0].pid, herder.processes[1].pid
    return {
        "server": _seconds(server),
        "worker": sum(_seconds(pid) for pid in _tree(worker)),
        "postgres": sum(_seconds(int(pid)) for pid in backends),
    }


def _seconds(pid: int) -> float:
    """A process's user and system time, with its waited-for children's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    found = [pid]
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            children = Path(f"/proc/{pid}/task/{thread}/children").read_text().split()
            for child in children:
                found += _tree(int(child))
    except FileNotFoundError:
        pass
    return found


if __name__ == "__main__":
    main()
