"""A workflow task's run inserted the way the workflow engine inserts one (a ``NewRun``
with its ``TaskOf``, applied by the store's unit of work), for tests of what such a run's
job is given before the engine itself exists to start one."""

from __future__ import annotations

from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import WORK, Changes, Event, NewRun, TaskOf
from herder.domain.states import RunState
from herder.store.store import Store


def insert_task_run(store: Store, tenant_id: str, job_id: str, task: TaskOf) -> str:
    """The id of a new queued run of ``job_id`` that is ``task``."""
    job = store.jobs.get(tenant_id, job_id)
    with store.work() as work:
        run_id = new_id("run", epoch_ms(work.now))
        new = NewRun(
            id=run_id,
            tenant_id=tenant_id,
            job_id=job.id,
            job_name=job.name,
            spec=job.spec,
            event=Event(run_id, "submitted", "test", target=RunState.QUEUED),
            task=task,
        )
        work.apply(Changes(new_runs=(new,), notices=frozenset({WORK})))
    return run_id
