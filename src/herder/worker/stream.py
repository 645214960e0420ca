"""The worker's end of its stream (``WS /v1/workers/{id}/stream``, docs/worker-protocol.md,
"The stream"): one connection on which what the dispatcher places here arrives the moment it
is placed, with what to stop, and on which reports go and are answered, each by its ``seq``.

The stream replaces the claim's long-poll and the report requests, not what they mean: an
attempt pushed and never received (the connection dropped) is handed over again after the
server's grace, as a lost claim answer is; a report whose answer is lost is sent again and
applied once (fencing; log chunks by ``seq``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable

from pydantic import TypeAdapter
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from herder.protocol import (
    ClaimReply,
    Report,
    ReportResults,
    ServerFrame,
    StreamAssignments,
    StreamProblem,
    StreamReport,
    StreamResults,
    StreamWant,
)

log = logging.getLogger("herder.worker")

# The server closes a stream with 4000 + the status a request would have got when the
# registration is over: the secret refused (4401, 4403), the worker forgotten (4404) or declared
# lost (4410).
OVER_CODES = (4401, 4403, 4404, 4410)
OVER_STATUSES = (401, 403, 410)  # the same, answered to the handshake
REPORT_ANSWER_SECONDS = 30.0  # as a report request's read timeout
MAX_FRAME_BYTES = 64 * 1024 * 1024  # a push of many assignments, each with its spec

# What a stream that could not open, or broke, raises besides the exceptions below: connect
# again after a back-off.
CONNECTION_TROUBLE = (OSError, WebSocketException)

_frames: TypeAdapter[StreamAssignments | StreamResults | StreamProblem] = TypeAdapter(ServerFrame)


class StreamOver(Exception):
    """The server says this registration is over: register again."""


class StreamRefused(Exception):
    """The server, or a proxy before it, does not open streams here: claim with long-polls."""


class StreamLost(Exception):
    """The stream is not open, or closed before a report's answer came."""


class ReportProblem(Exception):
    """The server could not take a report sent on the stream (a 422 names the field; a 503:
    send it again later)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status


def stream_url(server_url: str, worker_id: str) -> str:
    base = server_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/v1/workers/{worker_id}/stream"


class OpenStream:
    """One stream of one registration, while it is open."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._socket: ClientConnection | None = None
        self._answers: dict[int, asyncio.Future[ReportResults]] = {}
        self._seq = itertools.count()

    @property
    def is_open(self) -> bool:
        return self._socket is not None

    async def serve(
        self,
        url: str,
        secret: str,
        want: StreamWant,
        pushed: Callable[[ClaimReply], None],
        heard: Callable[[], None],
        tls: ssl.SSLContext | None,
    ) -> None:
        """Open the stream, say what is wanted, and hand each push to ``pushed`` (``heard``:
        the server answered at all) until the server closes it. ``StreamOver``,
        ``StreamRefused``, or a connection error (``OSError``, ``WebSocketException``)."""
        try:
            async with connect(
                url,
                additional_headers={"Authorization": f"Bearer {secret}"},
                ssl=tls,
                compression=None,  # reports are small and CPU is the hot path's cost
                max_size=MAX_FRAME_BYTES,
                user_agent_header="herder-worker",
            ) as socket:
                self._socket = socket
                heard()
                await socket.send(want.model_dump_json(exclude_none=True))
                async for message in socket:
                    heard()
                    self._received(message, pushed)
        except InvalidStatus as error:
            status = error.response.status_code
            if status in OVER_STATUSES:
                raise StreamOver(f"HTTP {status} to the stream's handshake") from error
            if status < 500:
                raise StreamRefused(f"HTTP {status} to the stream's handshake") from error
            raise
        except ConnectionClosed as error:
            if error.rcvd is not None and error.rcvd.code in OVER_CODES:
                raise StreamOver(f"{error.rcvd.code}: {error.rcvd.reason}") from error
            raise
        finally:
            self._socket = None
            for answer in self._answers.values():
                if not answer.done():
                    answer.set_exception(StreamLost("the stream closed before the answer came"))
            self._answers.clear()

    def _received(self, message: str | bytes, pushed: Callable[[ClaimReply], None]) -> None:
        frame = _frames.validate_json(message)
        if isinstance(frame, StreamAssignments):
            pushed(frame)
            return
        answer = self._answers.pop(frame.seq, None) if frame.seq is not None else None
        if answer is None or answer.done():
            if isinstance(frame, StreamProblem):
                log.warning("the server refused a frame on the stream: %s", frame.detail)
            return
        if isinstance(frame, StreamProblem):
            answer.set_exception(ReportProblem(frame.status, frame.detail))
        else:
            answer.set_result(ReportResults(results=frame.results, assignments=frame.assignments))

    async def report(self, report: Report) -> ReportResults:
        """Sent on the stream and answered there: ``StreamLost`` when it is not open or
        closes first, ``ReportProblem`` when the server could not take it."""
        socket = self._socket
        if socket is None:
            raise StreamLost("the stream is not open")
        seq = next(self._seq)
        answer = self._answers[seq] = asyncio.get_running_loop().create_future()
        frame = StreamReport.model_construct(type="report", seq=seq, report=report)
        try:
            await socket.send(frame.model_dump_json(exclude_none=True))
            async with asyncio.timeout(REPORT_ANSWER_SECONDS):
                results: ReportResults = await answer
                return results
        except (ConnectionClosed, TimeoutError) as error:
            raise StreamLost(str(error) or type(error).__name__) from error
        finally:
            self._answers.pop(seq, None)
