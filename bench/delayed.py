"""Scenario: a burst of delayed runs (issue 26).

100,000 one-off runs ``scheduled`` on PostgreSQL, their starts spread over one minute (the
first ``LEAD_SECONDS`` after the runs are made) — and, harder, all at one instant — and the
real ``Starter`` loop paced by its own answer (the seconds until the next start). Each run's
lateness is from its ``run_at`` to the commit of the batch that queued it; the table gives
its median, p99 and maximum.
"""

from __future__ import annotations

import bisect
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select

from herder.clock import epoch_ms
from herder.control.starter import Starter
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.states import RunState
from herder.store.runs.writes import new_run_row
from herder.store.schema import runs
from herder.store.store import Store

RUNS = 100_000
SPREAD_SECONDS = 60.0  # the starts, evenly over one minute
LEAD_SECONDS = 30.0  # from the runs' making to the first start
INSERT_BATCH = 5_000


@dataclass(frozen=True)
class DelayedResult:
    spread_seconds: float
    runs: int
    lateness_p50: float
    lateness_p99: float
    lateness_max: float
    batches: int  # statements that queued them


def measure(url: str, count: int = RUNS, spread_seconds: float = SPREAD_SECONDS) -> DelayedResult:
    store = Store(url)
    store.migrate()
    tenant = store.access.create_tenant("bench").id
    spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
    job = store.jobs.create(tenant, "report", spec)
    now = datetime.now(UTC)
    first = now + timedelta(seconds=LEAD_SECONDS)
    step = spread_seconds / count
    rows = []
    for index in range(count):
        run_id = new_id("run", epoch_ms(now))
        event = Event(run_id, "submitted", "bench")
        start = first + timedelta(seconds=index * step)
        new = NewRun(run_id, tenant, job.id, job.name, spec, event, state=RunState.SCHEDULED,
                     run_at=start)  # fmt: skip
        rows.append(new_run_row(new, now))
    with store.database.write() as connection:
        for start in range(0, len(rows), INSERT_BATCH):
            connection.execute(insert(runs), rows[start : start + INSERT_BATCH])
    with store.database.write() as connection:
        connection.exec_driver_sql("ANALYZE runs")
    ends: list[float] = []  # when each pass of the loop ended (its batch committed)
    loop = Starter(store)
    while True:
        wait = loop.step()
        ends.append(time.time())
        with store.database.read() as connection:
            left = connection.execute(
                select(func.count()).where(runs.c.state == RunState.SCHEDULED)
            ).scalar_one()
        if not left:
            break
        time.sleep(wait)
    with store.database.read() as connection:
        started = connection.execute(select(runs.c.run_at, runs.c.queued_at)).all()
    store.close()
    # a batch's runs share its ``now`` (their queued_at); it committed at the end of the
    # first pass that ended after it
    batches = sorted({queued_at for _, queued_at in started})
    committed = {at: ends[bisect.bisect_left(ends, at.timestamp())] for at in batches}
    lateness = sorted(committed[queued_at] - run_at.timestamp() for run_at, queued_at in started)
    return DelayedResult(
        spread_seconds,
        len(lateness),
        statistics.median(lateness),
        lateness[int(len(lateness) * 0.99) - 1],
        lateness[-1],
        len(batches),
    )
