"""The worker protocol: a worker registers with a fleet token, then claims work, beats and
reports with the secret it was given. Workers never touch the database; each call is one
unit of work: the claim's and the report's use cases are ``herder.app.claims`` and
``herder.app.reports``, the others one repository call each."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from herder.api.auth import (
    RegisteredWorker,
    StoreDep,
    SystemAdmin,
    WorkerSecret,
    WorkerToken,
)
from herder.api.openapi import problems
from herder.api.wakeups import Wakeups
from herder.app import checkpoints, claims
from herder.app.reports import report, report_and_hand_off
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.models import Worker
from herder.protocol import (
    AttemptCompletion,
    AttemptOutput,
    ClaimReply,
    ClaimRequest,
    Directives,
    Heartbeat,
    RegisterReply,
    RegisterRequest,
    Report,
    ReportResult,
    ReportResults,
)

router = APIRouter(prefix="/v1", tags=["worker protocol"])


def _wakeups(request: Request) -> Wakeups:
    wakeups: Wakeups = request.app.state.wakeups
    return wakeups


@router.post("/workers", status_code=status.HTTP_201_CREATED)
def register(
    body: RegisterRequest, token_id: WorkerToken, store: StoreDep, request: Request
) -> RegisterReply:
    worker, secret = store.workers.register(
        token_id,
        name=body.name,
        capacity=body.capacity,
        max_slots=body.max_slots,
        labels=body.labels,
        version=body.version,
        address=body.address or (request.client.host if request.client else ""),
    )
    settings = request.app.state.settings
    return RegisterReply(
        worker_id=worker.id,
        worker_secret=secret,
        heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
        heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds,
        hands_over_in_reports=True,
        streams=True,
    )


@router.get("/workers", tags=["administration"])
def list_workers(_admin: SystemAdmin, store: StoreDep) -> list[Worker]:
    """The fleet, for the system tenant's admins."""
    return store.workers.fleet()


@router.post("/workers/{worker_id}/heartbeat")
def heartbeat(
    body: Heartbeat, worker_id: RegisteredWorker, store: StoreDep, request: Request
) -> Directives:
    interval = request.app.state.settings.heartbeat_interval_seconds
    if body.leaving:
        store.fleet.leaving(worker_id)
    directives = store.workers.heartbeat(
        worker_id,
        body.running,
        unreported_grace_seconds=2 * interval + 1.0,
        finished=body.finished,
    )
    return directives


@router.post("/workers/{worker_id}/claim")
async def claim(
    body: ClaimRequest, worker_id: RegisteredWorker, store: StoreDep, request: Request
) -> ClaimReply:
    """Long-poll: returns as soon as the dispatcher placed work here or something must stop."""
    if body.leaving:
        await run_in_threadpool(store.fleet.leaving, worker_id)
    wakeups = _wakeups(request)
    deadline = time.monotonic() + body.wait_seconds
    news = True  # the first look always says what to stop or drop
    while True:
        since = wakeups.generation(worker_id)
        news = news or wakeups.take_news(worker_id)
        assignments, directives = await run_in_threadpool(
            claims.claim_with_directives, store, worker_id, body.max_runs, body.running, news
        )
        news = False
        remaining = deadline - time.monotonic()
        if assignments or directives.stops_any or remaining <= 0:
            return ClaimReply(assignments=assignments, **directives.model_dump())
        if wakeups.closed or await request.is_disconnected():
            return ClaimReply(assignments=[], cancel=[], drop=[])
        await wakeups.wait(worker_id, since, remaining)


def _single(results: list[ReportResult], attempt_id: str) -> ReportResult:
    """The single-attempt endpoints answer with the status itself."""
    for result in results:
        if result.status == 409:
            raise Conflict(result.detail)
        if result.status == 404:
            raise NotFound(result.detail)
    detail = results[0].detail if results else "stored"
    return ReportResult(attempt_id=attempt_id, status=200, detail=detail)


@router.post("/workers/{worker_id}/reports")
def reports(body: Report, worker_id: RegisteredWorker, store: StoreDep) -> ReportResults:
    """Batched output and completions; each result says whether it was applied. Asked for
    ``room``, the reply hands over the runs the report queued, placed on this worker."""
    room = body.room or 0
    results, given = report_and_hand_off(store, worker_id, body.logs, body.completions, room)
    return ReportResults(results=results, assignments=given)


@router.get("/workers/{worker_id}/artifacts/{artifact_id}", response_class=StreamingResponse)
def download(artifact_id: str, worker_id: RegisteredWorker, store: StoreDep) -> StreamingResponse:
    """The program of an attempt running on this worker, streamed; the worker checks it
    against its sha256 before it runs."""
    size, content = store.artifacts.read_for_worker(worker_id, artifact_id)
    headers = {"Content-Length": str(size)}
    return StreamingResponse(content, media_type="application/octet-stream", headers=headers)


AttemptNumber = Annotated[int, Query(ge=1, le=2**31 - 1, description="the attempt's number")]


@router.put(
    "/workers/{worker_id}/attempts/{attempt_id}/checkpoint",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problems(404, 409, 410, 413),
)
async def save_checkpoint(
    attempt_id: str,
    attempt: AttemptNumber,
    worker_id: RegisteredWorker,
    store: StoreDep,
    request: Request,
) -> Response:
    """The attempt's checkpoint directory as the worker saved it (raw bytes, a gzip'd tar;
    ``application/octet-stream``): the run's checkpoint from now on. Only the run's current
    attempt, running on this worker (409 otherwise: a zombie's save is refused and the run
    keeps what it had); at most the job's ``checkpoint_mb`` (413)."""
    await checkpoints.save(store, worker_id, attempt_id, attempt, request.stream())
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/workers/{worker_id}/attempts/{attempt_id}/checkpoint",
    response_class=StreamingResponse,
    responses=problems(404, 410),
)
def restore_checkpoint(
    attempt_id: str, attempt: AttemptNumber, worker_id: RegisteredWorker, store: StoreDep
) -> StreamingResponse:
    """The run's checkpoint, for its running attempt on this worker to restore (404 when the
    run has none); ``X-Herder-Sha256`` names the bytes."""
    sha256, size, content = checkpoints.restore(store, worker_id, attempt_id, attempt)
    headers = {"X-Herder-Sha256": sha256, "Content-Length": str(size)}
    return StreamingResponse(content, media_type="application/octet-stream", headers=headers)


@router.post("/attempts/{attempt_id}/logs", responses=problems(401, 403, 409, 410))
def attempt_logs(
    attempt_id: str, body: AttemptOutput, secret: WorkerSecret, store: StoreDep
) -> ReportResult:
    """One attempt's output (the batched ``/workers/{id}/reports`` is the fast path)."""
    store.access.authenticate_worker(body.worker_id, secret)
    if any(chunk.attempt_id != attempt_id for chunk in body.chunks):
        raise Invalid("every chunk must belong to the attempt in the path", field="chunks")
    results = report(store, body.worker_id, body.chunks, [])
    return _single(results, attempt_id)


@router.post("/attempts/{attempt_id}/complete", responses=problems(401, 403, 409, 410))
def attempt_complete(
    attempt_id: str,
    body: AttemptCompletion,
    secret: WorkerSecret,
    store: StoreDep,
) -> ReportResult:
    store.access.authenticate_worker(body.worker_id, secret)
    if body.completion.attempt_id != attempt_id:
        raise Invalid("the completion must be for the attempt in the path", field="attempt_id")
    results = report(store, body.worker_id, [], [body.completion])
    return _single(results, attempt_id)
