"""Moving workflow runs on inside the unit of work that ended one of their task runs (or
started, repaired or cancelled the workflow run): never a scan of DAGs.

The workflow run's row is locked first, so two of its tasks ending at once decide one after
the other, each seeing the other's end. The decision is ``domain.workflows.progress``; here
its facts are read — the current instance of every task, the outputs a mapped task or a
starting task needs — and its starts become runs, inserted through the unit of work (a
unique index on task instance and repair makes a repeated start nothing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, select

from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Priority
from herder.domain.lifecycle.changes import (
    DUE,
    WORK,
    Changes,
    Event,
    NewRun,
    TaskOf,
    workflow_run_transition,
)
from herder.domain.queue_room import RELEASER, hold
from herder.domain.states import RunState
from herder.domain.workflows.progress import (
    End,
    Instance,
    Start,
    WorkflowRunState,
    advance,
)
from herder.domain.workflows.spec import WorkflowSpec, map_source
from herder.domain.workflows.task_runs import gather_inputs, task_run_spec
from herder.store.queue_room import room_after_release
from herder.store.schema import runs, workflow_runs
from herder.store.workflows.definitions import dag_of

if TYPE_CHECKING:
    from herder.store.work import Work

Board = dict[str, list[Instance]]


def advance_run(work: Work, workflow_run_id: str) -> None:
    """Decide the run's pending tasks and apply the decision; end the run when every task
    has ended."""
    row = lock(work.connection, workflow_run_id)
    if row is None:
        return
    room = room_after_release(work, row.tenant_id, actor=RELEASER)
    if WorkflowRunState(row.state) is not WorkflowRunState.RUNNING:
        return
    dag = dag_of(work.connection, row.workflow_id, row.version)
    board = read_board(work.connection, row)
    made = _made(work.connection, row.id)
    while True:
        sources = _map_sources(work.connection, row, dag.spec, board)
        progress = advance(
            dag, board, row.params, sources, cancelling=row.cancel_requested, made=made
        )
        if not progress.starts:
            break
        new_runs, room = hold(_new_runs(work, row, dag.spec, board, progress.starts), room)
        made += len(new_runs)
        work.apply(_queued(new_runs))
        for new in new_runs:
            assert new.task is not None
            board.setdefault(new.task.task_name, []).append(Instance(new.task.map_index, new.state))
        if not _refused(progress.starts, new_runs):
            break  # the decision stands as made: nothing more to decide until a task ends
    if progress.end is not None:
        _finish(work, row, progress.end)


def lock(connection: Connection, workflow_run_id: str) -> Any:
    return connection.execute(
        select(workflow_runs).where(workflow_runs.c.id == workflow_run_id).with_for_update()
    ).first()


def read_board(connection: Connection, row: Any) -> Board:
    """Each task's current instances: its runs of the latest repair that ran it. A task the
    latest repair runs again has none until it starts again: it is pending."""
    found = connection.execute(
        select(runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.state).where(
            runs.c.workflow_run_id == row.id
        )
    ).all()
    return _current(found, row)


def _current(rows: Iterable[Any], workflow_run: Any) -> Board:
    by_repair: dict[str, dict[int, list[Instance]]] = defaultdict(lambda: defaultdict(list))
    for found in rows:
        instance = Instance(found.map_index, RunState(found.state))
        by_repair[found.task_name][found.repair].append(instance)
    again = set(workflow_run.repaired_tasks or ())
    board: Board = {}
    for task, repairs in by_repair.items():
        latest = max(repairs)
        if task in again and latest < workflow_run.repair:
            continue
        board[task] = repairs[latest]
    return board


def outputs_of(
    connection: Connection, workflow_run: Any, board: Board, tasks: Collection[str]
) -> dict[str, list[tuple[int, Any]]]:
    """The current instances' outputs of these tasks, ``(map_index, output)`` each."""
    if not tasks:
        return {}
    rows = connection.execute(
        select(runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.output).where(
            runs.c.workflow_run_id == workflow_run.id, runs.c.task_name.in_(list(tasks))
        )
    ).all()
    latest: dict[str, int] = {}
    for found in rows:
        latest[found.task_name] = max(latest.get(found.task_name, -1), found.repair)
    outputs: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for found in rows:
        if found.task_name in board and found.repair == latest[found.task_name]:
            outputs[found.task_name].append((found.map_index, found.output))
    return outputs


def _map_sources(
    connection: Connection, workflow_run: Any, spec: WorkflowSpec, board: Board
) -> dict[str, Any]:
    """What pending mapped tasks read their lists from: an upstream task's output (a mapped
    upstream task's: the list of its instances' outputs)."""
    wanted = {
        source.task
        for task in spec.tasks
        if task.name not in board
        and (source := map_source(task)) is not None
        and source.task is not None
        and source.task in board
    }
    sources: dict[str, Any] = {}
    for task, instances in outputs_of(connection, workflow_run, board, wanted).items():
        ordered = sorted(instances, key=lambda pair: pair[0])
        mapped = any(index >= 0 for index, _ in ordered)
        sources[task] = [output for _, output in ordered] if mapped else ordered[0][1]
    return sources


def _new_runs(
    work: Work, workflow_run: Any, spec: WorkflowSpec, board: Board, starts: list[Start]
) -> list[NewRun]:
    tasks = {task.name: task for task in spec.tasks}
    parents = {p for s in starts if s.state is RunState.QUEUED for p in tasks[s.task].depends_on}
    outputs = outputs_of(work.connection, workflow_run, board, parents)
    jobs = {name: JobSpec.model_validate(job["spec"]) for name, job in workflow_run.jobs.items()}
    new_runs = []
    for start in starts:
        task = tasks[start.task]
        job = workflow_run.jobs[task.job]
        state, reason, inputs = start.state, start.reason, None
        if state is RunState.QUEUED:
            inputs, problem = gather_inputs(task, outputs)
            if problem is not None:
                state, reason = RunState.FAILED, problem
        spec_run = task_run_spec(jobs[task.job], task, workflow_run.params)
        if workflow_run.backfill_id is not None:  # a backfill never starves current work
            spec_run = spec_run.model_copy(update={"priority": Priority.LOW})
        items = start.items if state is RunState.QUEUED and start.items is not None else None
        instances = [(-1, None)] if items is None else list(enumerate(items))
        deadline = task.overrides.start_deadline_seconds
        for map_index, item in instances:
            run_id = new_id("run", epoch_ms(work.now))
            message = f"task {task.name} of workflow run {workflow_run.id}: {reason}"
            new_runs.append(
                NewRun(
                    id=run_id,
                    tenant_id=workflow_run.tenant_id,
                    job_id=job["id"],
                    job_name=task.job,
                    spec=spec_run,
                    state=state,
                    reason=None if state is RunState.QUEUED else reason,
                    start_deadline=(
                        work.now + timedelta(seconds=deadline)
                        if deadline is not None and state is RunState.QUEUED
                        else None
                    ),
                    event=Event(run_id, message, f"workflow:{workflow_run.id}", target=state),
                    task=TaskOf(
                        workflow_run.id,
                        task.name,
                        workflow_run.repair,
                        map_index,
                        item,
                        inputs if state is RunState.QUEUED else None,
                    ),
                )
            )
    return new_runs


def _refused(starts: list[Start], new_runs: list[NewRun]) -> bool:
    """A start the decision made that could not be made as decided (its inputs too big): it
    failed instead, and its dependants must be decided again."""
    decided = {start.task: start.state for start in starts}
    return any(
        new.task and decided[new.task.task_name] is not _as_decided(new.state) for new in new_runs
    )


def _as_decided(state: RunState) -> RunState:
    """A run held past its tenant's ``max_queued`` started as decided: it waits to be queued."""
    return RunState.QUEUED if state is RunState.PENDING else state


def _made(connection: Connection, workflow_run_id: str) -> int:
    """The runs the workflow run has made, over every repair."""
    return int(
        connection.execute(
            select(func.count()).select_from(runs).where(runs.c.workflow_run_id == workflow_run_id)
        ).scalar_one()
    )


def _queued(new_runs: list[NewRun]) -> Changes:
    queued = [new for new in new_runs if new.state is RunState.QUEUED]
    waiting = [new for new in new_runs if new.state.is_active]  # queued, or held
    notices = ({WORK} if queued else set()) | (
        {DUE} if any(n.start_deadline for n in waiting) else set()
    )
    return Changes(new_runs=tuple(new_runs), notices=frozenset(notices))


def _finish(work: Work, workflow_run: Any, end: End) -> None:
    """The run ends; the unit of work's follow-up frees its slot (``store.follow_ups``)."""
    move = workflow_run_transition(
        workflow_run.id, WorkflowRunState.RUNNING, end.state, work.now,
        reason=end.reason, cancel_requested=False,
    )  # fmt: skip
    work.apply(Changes(workflow_run_moves=(move,)))
