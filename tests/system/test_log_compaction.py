"""``herder up`` compacts a finished run's output on its own, and the logs read the same."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from herder.settings import sqlite_url
from herder.store.database import Database
from herder.store.schema import attempt_logs, log_chunks
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

PROGRAM = """
import sys, time
for n in range(20):
    print(f"line {n}", flush=True)
    if n % 5 == 4:
        print(f"warning {n}", file=sys.stderr, flush=True)
        time.sleep(0.15)  # the worker sends what came each 0.1 s: several chunks
"""


def test_a_finished_runs_output_is_compacted_and_reads_the_same(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(embedded=True)
    script = tmp_path / "chatty.py"
    script.write_text(PROGRAM)
    database = Database(sqlite_url(cluster.home / "herder.db"))
    with cluster.client() as herder:
        artifact = herder.upload_artifact(script)
        job = herder.create_job("chatty", {"runtime": "python", "artifact": artifact.id})
        run = herder.wait(herder.start_run(job.id).id, timeout=30)
        before = herder.logs(run.id)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with database.read() as connection:
                chunks = connection.execute(
                    select(func.count()).select_from(log_chunks)
                ).scalar_one()
                blobs = connection.execute(
                    select(func.count()).select_from(attempt_logs)
                ).scalar_one()
            if (chunks, blobs) == (0, 1):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"not compacted within 10 s: {chunks} chunks, {blobs} blobs")
        after = herder.logs(run.id)
    database.dispose()
    assert run.state == "succeeded"
    assert len(before.chunks) > 1
    assert after == before
    stdout = "".join(chunk.text for chunk in after.chunks if chunk.stream == "stdout")
    assert stdout == "".join(f"line {n}\n" for n in range(20))
