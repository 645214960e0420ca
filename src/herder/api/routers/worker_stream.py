"""The worker's stream (``WS /v1/workers/{id}/stream``): one connection a worker, on which the
server pushes what the dispatcher places on it the moment it is placed, and on which the
worker's reports come back, with no request a claim or a report (docs/worker-protocol.md,
"The stream").

It is the claim's long-poll and the reports route kept open: the same use cases
(``app.claims``, ``app.reports``), wake-ups, fencing and hand-off. The secret is checked at the
handshake (a refusal is the problem document a request would get) and again before each look
and each report (from the store's few-seconds cache), so a revoked fleet token, a forgotten
worker or one declared lost ends the stream with a code that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
from fastapi import APIRouter, WebSocket
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect

from herder.api.auth import StoreDep, worker_secret
from herder.api.errors import herder_problem, status_and_title
from herder.api.nul import nul_in_body
from herder.api.wakeups import STREAM_FALLBACK_SECONDS, Wakeups
from herder.app import claims
from herder.app.reports import report_and_hand_off
from herder.domain.errors import HerderError, TemporarilyUnavailable
from herder.protocol import (
    HeldAttempt,
    StreamAssignments,
    StreamProblem,
    StreamReport,
    StreamResults,
    StreamWant,
    WorkerFrame,
)
from herder.telemetry import metrics

log = logging.getLogger("herder.api")
P = ParamSpec("P")
T = TypeVar("T")

router = APIRouter(prefix="/v1", tags=["worker protocol"])

# The registration is over (its secret refused, the worker forgotten or declared lost): the
# stream closes with 4000 + the status a request would have got, and the worker registers again.
OVER_STATUSES = (401, 403, 404, 410)
GOING_AWAY = 1001  # the API process stops: connect again (to another one)
INTERNAL_ERROR = 1011
UNAVAILABLE_RETRY_SECONDS = 1.0  # the store lost for a moment: look again after this
MAX_DETAIL_CHARS = 120  # a close frame's reason is at most 123 bytes

_frames: TypeAdapter[StreamWant | StreamReport] = TypeAdapter(WorkerFrame)


@dataclass(frozen=True)
class Ending:
    """How the server ends a stream: the close code and its reason."""

    code: int
    reason: str


def over(error: HerderError) -> Ending | None:
    """The ending of a stream whose registration ``error`` says is over, else None."""
    status, _ = status_and_title(type(error))
    if status not in OVER_STATUSES:
        return None
    return Ending(4000 + status, error.detail.encode()[:MAX_DETAIL_CHARS].decode(errors="ignore"))


@router.websocket("/workers/{worker_id}/stream")
async def stream(websocket: WebSocket, worker_id: str, store: StoreDep) -> None:
    """Assignments pushed as they are placed, reports answered, for one registered worker."""
    try:
        secret = worker_secret(websocket)
        await run_in_threadpool(store.access.authenticate_worker, worker_id, secret)
    except HerderError as error:
        await websocket.send_denial_response(herder_problem(error))
        return
    await websocket.accept()
    with metrics.WORKER_STREAMS.track_inprogress():
        await WorkerStream(websocket, store, websocket.app.state.wakeups, worker_id, secret).serve()


def _problem(data: bytes, detail: str, status: int = 422) -> StreamProblem:
    """A refused frame's problem, naming the report's ``seq`` when the frame has one."""
    try:
        seq = json.loads(data).get("seq")
    except (ValueError, AttributeError, RecursionError):
        seq = None
    seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
    return StreamProblem(seq=seq, status=status, detail=detail)


def _described(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'frame'}: {item['msg']}"
        for item in error.errors(include_url=False)[:5]
    )


class WorkerStream:
    """One worker's open stream: a reader (its frames) and a pusher (what is placed there)."""

    def __init__(
        self, websocket: WebSocket, store: StoreDep, wakeups: Wakeups, worker_id: str, secret: str
    ) -> None:
        self._websocket = websocket
        self._store = store
        self._wakeups = wakeups
        self._worker_id = worker_id
        self._secret = secret
        self._sending = asyncio.Lock()
        self._want: StreamWant | None = None
        self._wanted = asyncio.Event()  # the first want came: pushing starts
        self._calls: set[asyncio.Future[Any]] = set()  # store calls in threads, not yet over

    async def serve(self) -> None:
        reader = asyncio.create_task(self._read(), name=f"stream reader {self._worker_id}")
        pusher = asyncio.create_task(self._push(), name=f"stream pusher {self._worker_id}")
        try:
            done, _ = await asyncio.wait({reader, pusher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, pusher):
                task.cancel()
            with anyio.CancelScope(shield=True):  # even when the stream itself is cancelled
                await asyncio.wait({reader, pusher})
                await self._calls_ended()
        ending: Ending | None = None
        for task in done:
            if task.cancelled():
                continue
            if (error := task.exception()) is not None:
                if isinstance(error, WebSocketDisconnect):
                    return
                log.error("worker %s's stream failed", self._worker_id, exc_info=error)
                ending = Ending(INTERNAL_ERROR, "internal error")
            else:
                ending = task.result()
        if ending is not None:
            with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
                await self._websocket.close(ending.code, ending.reason)

    async def _in_thread(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A store call in a thread that goes on to its end when its task is cancelled; the
        stream ends after it (``_calls_ended``), so no store connection outlives the stream."""
        future = asyncio.ensure_future(run_in_threadpool(call, *args, **kwargs))
        self._calls.add(future)
        future.add_done_callback(self._calls.discard)
        return await asyncio.shield(future)

    async def _calls_ended(self) -> None:
        calls = set(self._calls)
        if calls:
            await asyncio.wait(calls)
        for call in calls:  # what a cancelled task's call raised has nobody else to read it
            if not call.cancelled() and (error := call.exception()) is not None:
                log.debug("worker %s: a store call ended after its stream", self._worker_id,
                          exc_info=error)  # fmt: skip

    async def _send(self, frame: StreamAssignments | StreamResults | StreamProblem) -> None:
        async with self._sending:
            await self._websocket.send_text(frame.model_dump_json())

    async def _admit(self) -> None:
        if not self._store.access.recently_admitted(self._worker_id, self._secret):
            await self._in_thread(
                self._store.access.authenticate_worker, self._worker_id, self._secret
            )

    # --- the worker's frames --------------------------------------------------------------

    async def _read(self) -> Ending | None:
        """Until the worker closes the stream (None), or its registration is over."""
        while True:
            message = await self._websocket.receive()
            if message["type"] == "websocket.disconnect":
                return None
            text = message.get("text")
            data: bytes = text.encode() if text is not None else message.get("bytes") or b""
            if (refused := nul_in_body(data)) is not None:
                await self._send(_problem(data, refused.detail))
                continue
            try:
                frame = _frames.validate_json(data)
            except ValidationError as error:
                await self._send(_problem(data, _described(error)))
                continue
            if isinstance(frame, StreamWant):
                if (ending := await self._wants(frame)) is not None:
                    return ending
            else:
                answer = await self._report(frame)
                if isinstance(answer, Ending):
                    return answer
                await self._send(answer)

    async def _wants(self, want: StreamWant) -> Ending | None:
        try:
            await self._admit()
            if want.leaving:
                await self._in_thread(self._store.fleet.leaving, self._worker_id)
        except HerderError as error:
            if (ending := over(error)) is not None:
                return ending
            raise
        self._want = want
        self._wanted.set()
        self._wakeups.wake_worker(self._worker_id)
        return None

    async def _report(self, frame: StreamReport) -> StreamResults | StreamProblem | Ending:
        report = frame.report
        try:
            await self._admit()
            results, given = await self._in_thread(
                report_and_hand_off,
                self._store,
                self._worker_id,
                report.logs,
                report.completions,
                report.room or 0,
            )
        except HerderError as error:
            if (ending := over(error)) is not None:
                return ending
            status, _ = status_and_title(type(error))
            return StreamProblem(seq=frame.seq, status=status, detail=error.detail)
        return StreamResults(seq=frame.seq, results=results, assignments=given)

    # --- what is placed here --------------------------------------------------------------

    async def _push(self) -> Ending:
        """Look, push what was placed (and what to stop), wait for a wake-up; again."""
        await self._wanted.wait()
        news = True  # the first look always says what to stop or drop
        first = True
        while True:
            want = self._want
            assert want is not None
            since = self._wakeups.generation(self._worker_id)
            news = news or self._wakeups.take_news(self._worker_id)
            running: list[HeldAttempt] = want.running if first else []  # drops: at heartbeats
            try:
                await self._admit()
                assignments, directives = await self._in_thread(
                    claims.claim_with_directives,
                    self._store,
                    self._worker_id,
                    want.max_runs,
                    running,
                    news,
                )
            except TemporarilyUnavailable:
                await asyncio.sleep(UNAVAILABLE_RETRY_SECONDS)
                continue
            except HerderError as error:
                if (ending := over(error)) is not None:
                    return ending
                raise
            news = first = False
            if assignments or directives.stops_any:
                await self._send(
                    StreamAssignments(assignments=assignments, **directives.model_dump())
                )
            if self._wakeups.closed:
                return Ending(GOING_AWAY, "the server is stopping")
            await self._wakeups.wait(
                self._worker_id, since, float("inf"), fallback=STREAM_FALLBACK_SECONDS
            )
