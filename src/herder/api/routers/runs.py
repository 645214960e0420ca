"""/v1/runs: history, detail, events, logs, cancellation, suspend and resume, priority."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from herder.api.auth import Caller, Operator, StoreDep, Writer, check_overrides
from herder.api.creators import CreatedBy
from herder.api.errors import status_and_title
from herder.api.openapi import problems
from herder.api.queries import Limit
from herder.api.ratelimit import Submitter, admit
from herder.api.schemas import (
    IsoTime,
    LogsResponse,
    PriorityChange,
    RunBatch,
    RunBatchResult,
    Submission,
)
from herder.app import checkpoints, logs, runs
from herder.app.actors import page_with_creator_names
from herder.app.submit import submit_many
from herder.domain.errors import HerderError
from herder.domain.listings import PageRequest, RunQuery
from herder.domain.models import CheckpointInfo, Page, Run, RunDetail, RunEvent
from herder.domain.states import RunState

router = APIRouter(prefix="/v1/runs", tags=["runs"])

FOLLOW_POLL_SECONDS = 0.2
FOLLOW_MAX_SECONDS = 25.0
RUN_ID_PREFIX = r"^run_[0-9A-HJKMNP-TV-Z]{1,26}$"  # ``run_`` and up to an id's 26 characters


def _run_query(
    job_id: str | None = None,
    schedule_id: Annotated[
        str | None, Query(description="the runs this schedule's fires started")
    ] = None,
    state: Annotated[list[RunState], Query(description="repeat for several")] = [],  # noqa: B006
    since: IsoTime | None = None,
    until: IsoTime | None = None,
    limit: Limit = 100,
    cursor: str | None = None,
    id_prefix: Annotated[
        str | None,
        Query(pattern=RUN_ID_PREFIX, description="runs whose id starts with this, e.g. run_01M82Z"),
    ] = None,
    created_by: CreatedBy = None,
) -> RunQuery:
    """The run listing's query string as one value."""
    return RunQuery(
        job_id, schedule_id, tuple(state), since, until, PageRequest(limit, cursor, id_prefix),
        created_by,
    )  # fmt: skip


@router.get("")
def list_runs(
    caller: Caller, store: StoreDep, query: Annotated[RunQuery, Depends(_run_query)]
) -> Page[Run]:
    """Newest first. ``id_prefix`` finds a run from the start of its id, as a narrow table
    shows it."""
    return page_with_creator_names(
        store, caller.tenant_id, store.runs.list(caller.tenant_id, query)
    )


@router.post("/batch", responses=problems(429))
async def submit_batch(
    body: RunBatch, caller: Operator, store: StoreDep, request: Request
) -> RunBatchResult:
    """Queue up to 1,000 one-off runs in one transaction — the fast way to submit many.
    The batch takes as many submissions from the tenant's rate quota as it holds runs, all
    or none (429). Each run is answered on its own, in order: one whose job is unknown, or
    whose key was used for another job, or whose parameters or env do not fit its job, is
    refused alone and the others are queued. An operator sets only declared parameters:
    ``args`` or ``env`` in any run refuse the batch (403)."""
    requests = [item.request() for item in body.runs]
    for index, one in enumerate(requests):
        check_overrides(caller, one.overrides, f"runs.{index}.")
    await admit(caller, request, len(body.runs))
    submitted = await run_in_threadpool(
        submit_many, store, caller.tenant_id, requests, actor=caller.actor
    )
    items = [
        _submission(index, one.run_id, one.created, one.error)
        for index, one in enumerate(submitted)
    ]
    return RunBatchResult(created=sum(one.created for one in submitted), items=items)


def _submission(
    index: int, run_id: str | None, created: bool, error: HerderError | None
) -> Submission:
    if error is None:
        return Submission(status=201 if created else 200, run_id=run_id)
    status, title = status_and_title(type(error))
    field = f"runs.{index}.{error.field}" if error.field else None
    return Submission(status=status, title=title, detail=error.detail, field=field)


@router.get("/{run_id}")
def get_run(run_id: str, caller: Caller, store: StoreDep) -> RunDetail:
    return store.runs.detail(caller.tenant_id, run_id)  # its creator named with its events


@router.get("/{run_id}/events")
def run_events(run_id: str, caller: Caller, store: StoreDep) -> list[RunEvent]:
    return store.runs.events(caller.tenant_id, run_id)


@router.post("/{run_id}/cancel", responses=problems(409))
def cancel_run(run_id: str, caller: Operator, store: StoreDep, response: Response) -> Run:
    """Ends a queued run at once (200); a running one is stopped by its worker (202)."""
    return _accepted_while_running(
        runs.cancel_run(store, caller.tenant_id, run_id, actor=caller.actor), response
    )


@router.post("/{run_id}/suspend", responses=problems(409))
def suspend_run(run_id: str, caller: Operator, store: StoreDep, response: Response) -> Run:
    """Holds a run until resumed: one not running yet is ``suspended`` at once (200); a
    running one is stopped by its workers as a preemption — SIGTERM, its stop grace, SIGKILL,
    its checkpoint saved — and is ``suspended`` when they report (202, ``suspend_requested``).
    A suspended or suspending run answers as the first suspend did; an ended run, or one
    being cancelled, is a 409."""
    return _accepted_while_running(
        runs.suspend_run(store, caller.tenant_id, run_id, actor=caller.actor), response
    )


@router.post("/{run_id}/priority", responses=problems(409))
def set_run_priority(run_id: str, body: PriorityChange, caller: Operator, store: StoreDep) -> Run:
    """Moves a run not started yet (queued, pending, waiting to retry, suspended) to another
    class, keeping its place in time so aging goes on; above the tenant's ``max_priority``
    is a 422, a run started or ended a 409. Its events record who changed it."""
    return runs.change_priority(store, caller.tenant_id, run_id, body.priority, actor=caller.actor)


@router.post("/{run_id}/resume", responses=problems(409))
def resume_run(run_id: str, caller: Operator, store: StoreDep) -> Run:
    """Queues a suspended run again, behind what queued meanwhile; held ``pending`` while its
    tenant is at ``max_queued``. Any run not suspended is a 409."""
    return runs.resume_run(store, caller.tenant_id, run_id, actor=caller.actor)


@router.get("/{run_id}/checkpoint")
def get_checkpoint(run_id: str, caller: Caller, store: StoreDep) -> CheckpointInfo:
    """The run's last saved checkpoint (docs/checkpoints.md): while the run lives, and after
    it ended for its job's ``checkpoint_keep_days``; 404 when there is none."""
    return store.checkpoints.get(caller.tenant_id, run_id)


@router.get("/{run_id}/checkpoint/content", response_class=StreamingResponse)
def checkpoint_content(run_id: str, caller: Writer, store: StoreDep) -> StreamingResponse:
    """The checkpoint's bytes as saved: a gzip'd tar of the checkpoint directory."""
    info, content = checkpoints.content(store, caller.tenant_id, run_id)
    headers = {
        "X-Herder-Sha256": info.sha256,
        "Content-Length": str(info.stored_bytes),
        "Content-Disposition": f'attachment; filename="{run_id}-checkpoint.tar.gz"',
    }
    return StreamingResponse(content, media_type="application/gzip", headers=headers)


@router.delete("/{run_id}/checkpoint", status_code=status.HTTP_204_NO_CONTENT)
def delete_checkpoint(run_id: str, caller: Operator, store: StoreDep) -> Response:
    """Forget it: the run's next attempt starts without one."""
    store.checkpoints.delete(caller.tenant_id, run_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{run_id}/rerun", status_code=status.HTTP_201_CREATED, responses=problems(409, 429))
def rerun(run_id: str, caller: Submitter, store: StoreDep, response: Response) -> Run:
    """A new run of an ended run's spec, linked to it (``rerun_of``): how a dead run is
    retried by hand. A submission, counted against the tenant's submission rate (429), at
    the class its run ran at within today's ``max_priority`` (docs/flow-control.md)."""
    run = runs.rerun_run(store, caller.tenant_id, run_id, actor=caller.actor)
    response.headers["Location"] = f"/v1/runs/{run.id}"
    return run


@router.get("/{run_id}/logs")
async def run_logs(
    run_id: str,
    caller: Caller,
    store: StoreDep,
    attempt: Annotated[int | None, Query(ge=1, description="default: the newest")] = None,
    rank: Annotated[int, Query(ge=0, description="which member of a gang")] = 0,
    after: Annotated[int, Query(ge=-1, description="the next_after of the last page")] = -1,
    follow: Annotated[bool, Query(description="wait up to 25 s for new output")] = False,
    limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
) -> LogsResponse:
    """A page of an attempt's output; with ``follow``, waits (up to 25 s) until there is some
    or the attempt ends."""
    deadline = time.monotonic() + FOLLOW_MAX_SECONDS
    while True:
        read = await run_in_threadpool(
            logs.read, store, caller.tenant_id, run_id,
            attempt=attempt, rank=rank, after=after, limit=limit,
        )  # fmt: skip
        if read.chunks or not read.active or not follow or time.monotonic() >= deadline:
            return LogsResponse(
                attempt=read.attempt,
                chunks=read.chunks,
                next_after=read.next_after,
                complete=read.complete,
            )
        await asyncio.sleep(FOLLOW_POLL_SECONDS)


def _accepted_while_running(run: Run, response: Response) -> Run:
    """A stop a worker has yet to carry out answers 202 (the run still ``running``)."""
    if run.state is RunState.RUNNING:
        response.status_code = status.HTTP_202_ACCEPTED
    return run
