"""The agent's reporter: output and completions go to the server batched, one request in flight
at a time, each under the registration its attempt was given to; what fails is kept and sent
again, sooner when a heartbeat says the server is back.

Completions go at once; output alone waits a little (``LOG_FLUSH_SECONDS``) to travel in
batches. A batch larger than ``REPORT_BUDGET_BYTES`` goes as several requests, each well under
the server's body limit (a refused oversize request would be sent again forever), one at a
time, what has come meanwhile joining the rest: an attempt's output goes before its
completion, but a completion with no output left to send goes first, so a quiet run's end
never waits behind other attempts' megabytes of output.

An ended attempt whose report is not delivered yet is named in heartbeats as ``finished``
(``unreported``), so the server does not take it for lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping

import httpx

from herder.domain.models import Assignment
from herder.protocol import Completion, HeldAttempt, OutputChunk, Report
from herder.worker.attempts import LiveAttempt
from herder.worker.connection import ServerConnection, described
from herder.worker.output import Chunk
from herder.worker.stream import ReportProblem

log = logging.getLogger("herder.worker")

LOG_FLUSH_SECONDS = 0.1  # output is sent at most this often while attempts run
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)  # back-off while the server cannot be reached
REPORT_BUDGET_BYTES = 1024 * 1024  # per request; the server takes up to 4 MiB (api/limits.py)
ITEM_OVERHEAD_BYTES = 256  # a log chunk's fields besides its data


def backoff(failures: int) -> float:
    return RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]


def split(report: Report, budget: int = REPORT_BUDGET_BYTES) -> list[Report]:
    """``report`` as consecutive parts of about ``budget`` bytes each (one item larger than
    that goes alone): the completions of attempts with no output in it first, then the
    output, in order, then the other completions."""
    parts: list[Report] = []
    part, size = Report(), 0
    with_output = {chunk.attempt_id for chunk in report.logs}
    ended = [item for item in report.completions if item.attempt_id not in with_output]
    ended_after = [item for item in report.completions if item.attempt_id in with_output]
    items: list[OutputChunk | Completion] = [*ended, *report.logs, *ended_after]
    for item in items:
        if isinstance(item, OutputChunk):
            item_size = len(item.data_b64) + ITEM_OVERHEAD_BYTES
        else:
            item_size = len(item.model_dump_json())
        if size and size + item_size > budget:
            parts.append(part)
            part, size = Report(), 0
        if isinstance(item, OutputChunk):
            part.logs.append(item)
        else:
            part.completions.append(item)
        size += item_size
    return [*parts, part]


def _chunks(attempt_id: str, attempt: int, chunks: list[Chunk]) -> list[OutputChunk]:
    return [
        OutputChunk.of(attempt_id, attempt, chunk.seq, chunk.stream, chunk.data) for chunk in chunks
    ]


class Reporter:
    def __init__(
        self,
        connection: ServerConnection,
        running: Mapping[str, LiveAttempt],
        drop: Callable[[str], None],
        room: Callable[[str], int] = lambda _: 0,
        start: Callable[[Assignment], None] = lambda _: None,
    ) -> None:
        """``running``: the agent's attempts, whose output is sent as it comes; ``drop``: what
        to do with an attempt whose report the server refused (it is no longer ours);
        ``room``: how many attempts the registration could start now, asked for in a report
        that ends some; ``start``: what to do with each one the reply hands over."""
        self._connection = connection
        self._running = running
        self._drop = drop
        self._room = room
        self._start = start
        self._pending: dict[str, Report] = defaultdict(Report)  # by worker id
        # (worker id, attempt id, number) of ended attempts whose report is not delivered yet
        self._unreported: set[tuple[str, str, int]] = set()
        self._needed = asyncio.Event()
        self._completion_ready = asyncio.Event()
        self._server_back = asyncio.Event()
        self.broken = False  # its loop died: nothing more is sent

    def output_written(self) -> None:
        self._needed.set()

    def server_answered(self) -> None:
        """A heartbeat got through: retry what failed now, not after the back-off."""
        self._server_back.set()

    def complete(self, attempt: LiveAttempt, completion: Completion) -> None:
        """``attempt`` ended: its last output and its completion go next."""
        report = self._pending[attempt.worker_id]
        report.logs += _chunks(completion.attempt_id, completion.attempt, attempt.output.take())
        report.completions.append(completion)
        self._unreported.add((attempt.worker_id, completion.attempt_id, completion.attempt))
        self._needed.set()
        self._completion_ready.set()

    def unreported(self, worker_id: str) -> list[HeldAttempt]:
        """Ended attempts of that registration whose report is still on its way."""
        return [
            HeldAttempt(attempt_id=attempt_id, attempt=number)
            for owner, attempt_id, number in self._unreported
            if owner == worker_id
        ]

    async def run(self) -> None:
        try:
            await self._loop()
        except Exception:
            self.broken = True
            raise

    async def _loop(self) -> None:
        failures = 0
        while True:
            await self._needed.wait()
            self._needed.clear()
            self._completion_ready.clear()
            if await self._send():
                failures = 0
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(LOG_FLUSH_SECONDS):
                        await self._completion_ready.wait()
            else:
                failures += 1
                self._needed.set()
                self._server_back.clear()
                with contextlib.suppress(TimeoutError):  # back off, unless the server is back
                    async with asyncio.timeout(backoff(failures)):
                        await self._server_back.wait()

    async def flush(self) -> None:
        """Send everything pending, retrying until it is delivered (the caller bounds it);
        nothing when the reporter is broken."""
        failures = 0
        while self._pending and not self.broken:
            if not await self._send():
                failures += 1
                await asyncio.sleep(backoff(failures))

    def _collect(self) -> dict[str, Report]:
        """Everything pending, with the output of running attempts, by worker id (a worker
        that registered again still reports its old attempts under the old id)."""
        for attempt_id, attempt in self._running.items():
            if attempt.output.has_pending and not attempt.dropped:
                number = attempt.assignment.attempt
                output = _chunks(attempt_id, number, attempt.output.take())
                self._pending[attempt.worker_id].logs += output
        return self._take()

    def _take(self) -> dict[str, Report]:
        """What is pending, by worker id, leaving nothing."""
        reports, self._pending = self._pending, defaultdict(Report)
        return {worker: report for worker, report in reports.items() if report != Report()}

    async def _send(self) -> bool:
        """Everything pending, a request at a time, each worker id's in turn, taking in what
        came meanwhile before each; what fails is kept for next time."""
        reports = self._collect()
        while reports:
            delivered = True
            for worker_id, report in reports.items():
                first, *rest = split(report)
                self._keep(worker_id, rest)
                if not await self._send_part(worker_id, first):
                    self._keep(worker_id, [first])
                    delivered = False
            if not delivered:
                return False
            reports = self._take()  # the rest, and the completions that came meanwhile
        return True

    def _keep(self, worker_id: str, unsent: list[Report]) -> None:
        """What could not be sent goes first next time."""
        if not unsent:
            return
        later = self._pending[worker_id]
        self._pending[worker_id] = Report.model_construct(  # items checked when they were made
            logs=[chunk for part in unsent for chunk in part.logs] + later.logs,
            completions=[item for part in unsent for item in part.completions] + later.completions,
        )

    async def _send_part(self, worker_id: str, report: Report) -> bool:
        room = self._room(worker_id) if report.completions else 0
        if room:  # attempts end: their room may take what comes after them
            report = report.model_copy(update={"room": room})
        try:
            answer = await self._connection.report(worker_id, report)
        except httpx.HTTPError as error:
            log.warning("report failed, will retry: %s", described(error))
            return False
        except ReportProblem as error:  # sent on the stream, not taken there
            log.warning("report failed, will retry: %s", error)
            return False
        for completion in report.completions:  # answered: accepted or refused
            self._unreported.discard((worker_id, completion.attempt_id, completion.attempt))
        for result in answer.results:
            if not result.applied:
                log.warning("server refused a report for %s: %s", result.attempt_id, result.detail)
                self._drop(result.attempt_id)
        for assignment in answer.assignments:
            self._start(assignment)
        return True
