"""A user's moves on one run: cancel, suspend, resume, a new priority, a re-run. Each one
use case in one unit of work: read the run (locked where a decision depends on it), let
``domain.lifecycle`` decide, apply, follow up (a run that ended moves its workflow run or
backfill on), answer with the run as it is after."""

from __future__ import annotations

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.jobs import Priority
from herder.domain.lifecycle.cancel import Cause, cancel, rerun
from herder.domain.lifecycle.priority import rerun_priority
from herder.domain.lifecycle.suspend import resume, suspend
from herder.domain.models import Run
from herder.domain.queue_room import RELEASER, UNLIMITED
from herder.domain.states import RunState
from herder.store.queue_room import queue_room, release_held
from herder.store.runs.facts import active_runs
from herder.store.runs.priority import max_priority, set_priority
from herder.store.runs.repository import read_run
from herder.store.runs.writes import new_run_row
from herder.store.store import Store


def cancel_run(store: Store, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
    """Cancel a run. A run that is not running yet ends at once; a running one is marked
    and its workers, told through a notice, kill it."""
    with unit_of_work(store) as work:
        read_run(work.connection, tenant_id, run_id, work.now)
        (active,) = active_runs(work.connection, [run_id])
        work.apply(cancel(active, Cause(actor), work.now))
        follow_up(work)
        return read_run(work.connection, tenant_id, run_id, work.now)


def suspend_run(store: Store, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
    """Hold a run until resumed. One not running yet is held at once, and the room it
    took under ``max_queued`` goes to a held run; a running one is marked and its
    workers, told through a notice, stop it as a preemption (``domain.lifecycle.suspend``)."""
    with unit_of_work(store) as work:
        read_run(work.connection, tenant_id, run_id, work.now)
        (active,) = active_runs(work.connection, [run_id])
        moved = work.apply(suspend(active, actor, work.now)).moved
        if moved and active.run.state is RunState.QUEUED:
            release_held(work, tenant_id, actor=RELEASER)
        return read_run(work.connection, tenant_id, run_id, work.now)


def resume_run(store: Store, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
    """Queue a suspended run again: held ``pending`` instead when its tenant is at
    ``max_queued``."""
    with unit_of_work(store) as work:
        read_run(work.connection, tenant_id, run_id, work.now)
        (active,) = active_runs(work.connection, [run_id])
        state = active.run.state
        room = queue_room(work, tenant_id) if state is RunState.SUSPENDED else UNLIMITED
        work.apply(resume(run_id, state, room, actor, work.now))
        return read_run(work.connection, tenant_id, run_id, work.now)


def change_priority(
    store: Store, tenant_id: str, run_id: str, priority: Priority, *, actor: str = "user"
) -> Run:
    """Move a run not started yet to another class, keeping its place in time."""
    with unit_of_work(store) as work:
        read_run(work.connection, tenant_id, run_id, work.now)
        set_priority(work.connection, tenant_id, run_id, priority, actor, work.now)
        return read_run(work.connection, tenant_id, run_id, work.now)


def rerun_run(store: Store, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
    """A new run of what an ended run ran (its spec as submitted), linked to it — how a
    dead run leaves the dead-letter set — at its class within today's ``max_priority``."""
    with unit_of_work(store) as work:
        old = read_run(work.connection, tenant_id, run_id, work.now)
        job = store.jobs.get_many_within(work.connection, {(tenant_id, old.job_id)})
        job_class = job[tenant_id, old.job_id].spec.priority if job else None
        allowed = max_priority(work.connection, tenant_id)
        priority = rerun_priority(old.spec.priority, allowed, job_class)
        new_run_id = new_id("run", epoch_ms(work.now))
        changes = rerun(old, tenant_id, new_run_id, actor, work.now, priority=priority)
        work.apply(changes)
        (new,) = changes.new_runs
        return Run.model_validate(new_run_row(new, work.now, stored_spec=new.spec))
