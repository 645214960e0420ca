"""The worker's side of the worker protocol: the messages of ``herder.protocol`` over one HTTP
connection pool.

The fleet's worker token is sent only to register; every later call presents the secret the
registration answered with, kept in memory only (never on disk, in argv or in an attempt's
environment). A worker that registered again keeps its old secrets, to report its old
attempts under the ids they were given to.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import httpx
from pydantic import BaseModel

from herder.domain.errors import Invalid, Unavailable
from herder.domain.jobs import MAX_ARTIFACT_BYTES
from herder.domain.models import CheckpointRef
from herder.protocol import (
    ClaimReply,
    ClaimRequest,
    Directives,
    Heartbeat,
    HeldAttempt,
    RegisterReply,
    RegisterRequest,
    Report,
    ReportResults,
    StreamWant,
)
from herder.tls import client_context
from herder.worker.stream import OpenStream, StreamLost, stream_url

log = logging.getLogger("herder.worker")

CLAIM_WAIT_SECONDS = 20.0
GONE = 410  # the server declared this worker lost: drop everything, register again
UNKNOWN = 401  # the server does not know this worker's secret (say, an older registration)

CHECKPOINT_CHUNK_BYTES = 1024 * 1024
ARTIFACT_CHUNK_BYTES = 1024 * 1024
CHECKPOINT_TIMEOUT = httpx.Timeout(10.0, read=300.0, write=300.0)  # 256 MiB on a slow link
REFUSALS = (404, 409, 410, 413, 422)  # a checkpoint the server will not take or give

Reply = TypeVar("Reply", bound=BaseModel)


class RegistrationOver(Exception):
    """The server declared this worker lost, or no longer knows its secret: the worker must
    drop its attempts and register again."""


class CheckpointRefused(Exception):
    """The server would not store a checkpoint (a zombie attempt's, or past its job's
    checkpoint_mb), or has none to give, or gave bytes that are not the ones named: why."""


class CheckpointGone(CheckpointRefused):
    """The run has no checkpoint any more (deleted after the attempt was claimed)."""


def _refusal(response: httpx.Response) -> CheckpointRefused:
    try:
        detail = str(response.json().get("detail", ""))
    except ValueError:
        detail = ""
    refusal = CheckpointGone if response.status_code == 404 else CheckpointRefused
    return refusal(detail or f"HTTP {response.status_code}")


def described(error: httpx.HTTPError) -> str:
    """An HTTP failure on one line, with the server's own detail when it gave one (httpx's
    text for a status spans lines and ends with a link to a page on status codes)."""
    if not isinstance(error, httpx.HTTPStatusError):
        return str(error) or type(error).__name__
    response = error.response
    try:
        detail = str(response.json().get("detail", ""))
    except (ValueError, AttributeError):
        detail = ""
    said = f"HTTP {response.status_code} from {error.request.url.path}"
    return f"{said}: {' '.join(detail.split())}" if detail else said


class ServerConnection:
    def __init__(
        self,
        server_url: str,
        token: str,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        ca_file: Path | None = None,
    ) -> None:
        """``ca_file``: the authority of an https server's certificate, when not the
        system's (``TlsError`` when it cannot be read)."""
        self._token = token
        self._server_url = server_url
        self._secrets: dict[str, str] = {}  # worker id → its secret, in memory only
        # A stream needs the network: a test's in-process transport has none.
        self.streams = transport is None
        self._stream: OpenStream | None = None
        self._stream_tls = None if ca_file is None else client_context(ca_file)
        self._http = httpx.AsyncClient(
            transport=transport,
            base_url=server_url.rstrip("/"),
            timeout=httpx.Timeout(10.0, read=CLAIM_WAIT_SECONDS + 10.0),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
            verify=True if ca_file is None else client_context(ca_file),
        )
        self.worker_id = ""
        self.last_contact = time.monotonic()  # when the server last answered at all

    async def close(self) -> None:
        await self._http.aclose()

    def _as(self, worker_id: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secrets.get(worker_id, '')}"}

    async def _post(
        self, path: str, message: BaseModel, reply: type[Reply], headers: dict[str, str]
    ) -> Reply:
        response = await self._http.post(
            path,
            content=message.model_dump_json(exclude_none=True),
            headers={**headers, "Content-Type": "application/json"},
        )
        if response.status_code < 500:
            self.last_contact = time.monotonic()
        response.raise_for_status()
        return reply.model_validate_json(response.content)

    async def _post_as_worker(self, path: str, message: BaseModel, reply: type[Reply]) -> Reply:
        """A call of the current registration; ``RegistrationOver`` when it has ended."""
        try:
            return await self._post(
                f"/v1/workers/{self.worker_id}/{path}", message, reply, self._as(self.worker_id)
            )
        except httpx.HTTPStatusError as error:
            if error.response.status_code in (GONE, UNKNOWN):
                raise RegistrationOver(str(error)) from error
            raise

    async def register(self, request: RegisterRequest) -> RegisterReply:
        """Register as a new worker (a lost one registers again, under a new id)."""
        answer = await self._post(
            "/v1/workers", request, RegisterReply, {"Authorization": f"Bearer {self._token}"}
        )
        self.worker_id = answer.worker_id
        self._secrets[self.worker_id] = answer.worker_secret
        return answer

    async def heartbeat(self, heartbeat: Heartbeat) -> Directives:
        return await self._post_as_worker("heartbeat", heartbeat, Directives)

    async def claim(
        self,
        max_runs: int,
        running: list[HeldAttempt],
        *,
        leaving: bool = False,
        wait_seconds: float = CLAIM_WAIT_SECONDS,
    ) -> ClaimReply:
        """What was placed here (``wait_seconds``: how long the server may wait for some)."""
        request = ClaimRequest(
            running=running,
            max_runs=max_runs,
            wait_seconds=wait_seconds,
            leaving=leaving or None,
        )
        return await self._post_as_worker("claim", request, ClaimReply)

    async def stream(self, want: StreamWant, pushed: Callable[[ClaimReply], None]) -> None:
        """This registration's stream, open until the server closes it: each push goes to
        ``pushed``, and reports go on it meanwhile (``stream.OpenStream.serve``)."""
        opened = self._stream = OpenStream(self.worker_id)
        try:
            url = stream_url(self._server_url, self.worker_id)
            secret = self._secrets.get(self.worker_id, "")
            await opened.serve(url, secret, want, pushed, self._heard, self._stream_tls)
        finally:
            if self._stream is opened:
                self._stream = None

    def _heard(self) -> None:
        self.last_contact = time.monotonic()

    async def report(self, worker_id: str, report: Report) -> ReportResults:
        """Under ``worker_id``, the registration the reported attempts were given to: on its
        stream when one is open, else (or when it closes first) as a request."""
        opened = self._stream
        if opened is not None and opened.is_open and opened.worker_id == worker_id:
            try:
                return await opened.report(report)
            except StreamLost as error:
                log.info("the stream closed under a report (%s): sending it as a request", error)
        path = f"/v1/workers/{worker_id}/reports"
        return await self._post(path, report, ReportResults, self._as(worker_id))

    async def download(self, sha256: str, into: Path) -> None:
        """Write the artifact an attempt of this registration needs to ``into`` (a new file,
        0600) as it arrives, never whole in memory; the cache checks what it holds.
        ``Unavailable`` with the server's reason when it sends none."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        path, headers = f"/v1/workers/{self.worker_id}/artifacts/{sha256}", self._as(self.worker_id)
        async with self._http.stream("GET", path, headers=headers) as response:
            if response.is_error:
                await response.aread()
                error = httpx.HTTPStatusError("", request=response.request, response=response)
                raise Unavailable(f"artifact {sha256} not fetched: {described(error)}")
            size = 0
            with open(os.open(into, flags, 0o600), "wb") as sink:
                async for chunk in response.aiter_bytes(ARTIFACT_CHUNK_BYTES):
                    size += len(chunk)
                    if size > MAX_ARTIFACT_BYTES:
                        raise Invalid(f"the server sent more than artifact {sha256} can hold")
                    sink.write(chunk)

    async def upload_checkpoint(self, attempt_id: str, attempt: int, archive: Path) -> None:
        """Stream ``archive`` to the server as the run's checkpoint (this registration's
        attempt); ``CheckpointRefused`` when it will not take it."""

        async def chunks() -> AsyncIterator[bytes]:
            with archive.open("rb") as source:
                while chunk := source.read(CHECKPOINT_CHUNK_BYTES):
                    yield chunk

        response = await self._http.put(
            self._checkpoint_path(attempt_id),
            params={"attempt": attempt},
            content=chunks(),
            headers={
                **self._as(self.worker_id),
                "Content-Type": "application/octet-stream",
                "Content-Length": str(archive.stat().st_size),
            },
            timeout=CHECKPOINT_TIMEOUT,
        )
        if response.status_code in REFUSALS:
            raise _refusal(response)
        response.raise_for_status()

    async def download_checkpoint(
        self, attempt_id: str, attempt: int, ref: CheckpointRef, into: Path
    ) -> None:
        """Write the run's checkpoint to ``into`` (a new file, 0600), checked against ``ref``:
        ``CheckpointGone`` when the server has none now, ``CheckpointRefused`` when it sends
        other bytes."""
        digest, size = hashlib.sha256(), 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        path, params = self._checkpoint_path(attempt_id), {"attempt": attempt}
        headers = self._as(self.worker_id)
        request = self._http.stream(
            "GET", path, params=params, headers=headers, timeout=CHECKPOINT_TIMEOUT
        )
        async with request as response:
            if response.status_code in REFUSALS:
                await response.aread()
                raise _refusal(response)
            response.raise_for_status()
            with open(os.open(into, flags, 0o600), "wb") as sink:
                async for chunk in response.aiter_bytes(CHECKPOINT_CHUNK_BYTES):
                    size += len(chunk)
                    if size > ref.stored_bytes:
                        raise CheckpointRefused("the server sent more than the checkpoint holds")
                    digest.update(chunk)
                    sink.write(chunk)
        if size != ref.stored_bytes or digest.hexdigest() != ref.sha256:
            raise CheckpointRefused("the bytes received are not the run's checkpoint")

    def _checkpoint_path(self, attempt_id: str) -> str:
        return f"/v1/workers/{self.worker_id}/attempts/{attempt_id}/checkpoint"
