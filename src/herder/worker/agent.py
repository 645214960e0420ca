"""The worker agent: register, then three loops until told to stop.

    claim loop      long-polls the server for attempts that fit (and for stops)
    heartbeat loop  says "alive, running these" every few seconds; hears stops:
                    cancel and preempt (TERM, grace, KILL; reported apart), drop (kill, silently)
    reporter        sends output and completions, batched, one request in flight at a time

Each claimed attempt runs in its own task: fetch the artifact, mount the attempt's disk and
place the program on it, execute it in its sandbox (own uid, namespaces, file system and
seccomp filter; ``sandbox.py``) within its resource request (cgroups or rlimits, chosen once at
start), report how it ended, clean up. Where attempts run on this host (state directories,
uids, disks, networks) is ``host.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from herder.domain.errors import HerderError
from herder.domain.jobs import Capacity, Runtime
from herder.domain.models import Assignment
from herder.domain.states import AttemptState
from herder.worker.address import local_address
from herder.worker.cache import ArtifactCache
from herder.worker.connection import Registration, ServerConnection, is_gone
from herder.worker.executor import Outcome, StopRequest, execute, not_started
from herder.worker.host import AttemptHost, AttemptPlace
from herder.worker.isolation import Isolation
from herder.worker.limits import MAX_PROCESSES_PER_ATTEMPT, limits_for
from herder.worker.network import NetworkUnavailable
from herder.worker.output import Chunk, OutputBuffer
from herder.worker.sandbox import SANDBOX_WORKSPACE, attempt_environment
from herder.worker.workspace import build_plan, place_artifact, unpack_archive

log = logging.getLogger("herder.worker")

LOG_FLUSH_SECONDS = 0.1  # output is sent at most this often while attempts run
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)  # back-off while the server cannot be reached
SHUTDOWN_REPORT_SECONDS = 5.0
PREEMPTED_REASON = "preempted by a higher-priority run"


@dataclass(frozen=True)
class WorkerConfig:
    server_url: str
    token: str
    name: str
    capacity: Capacity
    home: Path
    python: str
    max_slots: int = 256
    labels: dict[str, str] = field(default_factory=dict)
    run_uid_base: int = 61000
    run_uid_count: int = 4096
    kill_grace_seconds: float = 5.0
    address: str = ""  # where gang peers reach this worker; "" finds it (see address.py)
    max_processes_per_attempt: int = MAX_PROCESSES_PER_ATTEMPT
    isolation: Isolation = Isolation.SANDBOX
    expose: tuple[str, ...] = ()  # more host directories attempts see, read-only
    block: tuple[str, ...] = ()  # more destinations network-on attempts must not reach


@dataclass
class _Report:
    logs: list[tuple[str, int, Chunk]] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Attempt:
    assignment: Assignment
    worker_id: str  # the registration it was given to
    output: OutputBuffer = field(default_factory=OutputBuffer)
    cancel: StopRequest = field(default_factory=StopRequest)
    dropped: bool = False  # no longer ours: kill it, report nothing
    lost_because: str | None = None  # killed because the worker stops or lost the server


def _backoff(failures: int) -> float:
    return RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]


class Agent:
    def __init__(
        self, config: WorkerConfig, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        """``transport``: how to reach the server, when not over the network (tests)."""
        self.config = config
        self.connection = ServerConnection(config.server_url, config.token, transport)
        self.host = AttemptHost(
            config.home,
            config.isolation,
            uid_base=config.run_uid_base,
            uid_count=config.run_uid_count,
            server_url=config.server_url,
            expose=config.expose,
            block=config.block,
        )
        self.cache = ArtifactCache(self.host.state / "cache", self.connection.download)
        self.address = config.address or local_address(config.server_url)
        self._running: dict[str, _Attempt] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._completions: list[tuple[str, list[Chunk], dict[str, Any]]] = []
        self._unsent_logs: list[tuple[str, str, int, Chunk]] = []
        # (worker id, attempt id, number) of ended attempts whose report is not delivered yet
        self._unreported: set[tuple[str, str, int]] = set()
        self._report_needed = asyncio.Event()
        self._server_back = asyncio.Event()  # a heartbeat got through: retry reports now
        self._gone = asyncio.Event()
        self._completion_ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        background = [
            asyncio.create_task(self._report_loop(), name="reporter"),
            asyncio.create_task(self.host.sweeper.sweep_forever(), name="uid sweeper"),
        ]
        try:
            while not stop.is_set():
                registration = await self._register(stop)
                if registration is None or not await self._session(registration, stop):
                    break
                log.warning("the server declared this worker lost: killing its attempts")
                await self._end_all_attempts("the server declared the worker lost")
        finally:
            await self._shutdown(background)

    async def _register(self, stop: asyncio.Event) -> Registration | None:
        failures = 0
        while not stop.is_set():
            try:
                registration = await self.connection.register(
                    self.config.name,
                    self.config.capacity,
                    self.config.max_slots,
                    self.config.labels,
                    self.address,
                )
                log.info(
                    "registered with %s as %s, reachable at %s",
                    self.config.server_url,
                    registration.worker_id,
                    self.address,
                )
                return registration
            except httpx.HTTPStatusError as error:
                if error.response.status_code in (401, 403):
                    raise SystemExit(f"the server refused the worker token: {error}") from error
                log.warning("cannot register yet: %s", error)
            except httpx.TransportError as error:
                log.warning("cannot reach %s yet: %s", self.config.server_url, error)
            failures += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _backoff(failures))
        return None

    async def _session(self, registration: Registration, stop: asyncio.Event) -> bool:
        """Work as one registered worker until told to stop (``False``) or declared lost
        (``True``: register again)."""
        self._gone.clear()
        interval = registration.heartbeat_interval_seconds
        lease = max(interval, registration.heartbeat_timeout_seconds - interval)
        loops = [
            asyncio.create_task(self._claim_loop(), name="claim"),
            asyncio.create_task(self._heartbeat_loop(interval), name="heartbeat"),
            asyncio.create_task(self._watchdog(lease), name="watchdog"),
        ]
        ends = [asyncio.create_task(stop.wait()), asyncio.create_task(self._gone.wait())]
        done, _ = await asyncio.wait([*loops, *ends], return_when=asyncio.FIRST_COMPLETED)
        for task in [*loops, *ends]:
            task.cancel()
        await asyncio.gather(*loops, *ends, return_exceptions=True)
        for task in done & set(loops):
            if not task.cancelled() and task.exception() is not None:  # stop loudly
                log.error("worker loop %s died", task.get_name(), exc_info=task.exception())
                return False
        return self._gone.is_set() and not stop.is_set()

    async def _end_all_attempts(self, why: str) -> None:
        """Kill every attempt and report it ``lost``, under the worker id they were given to:
        the server refuses (and records) reports of attempts it has given to others."""
        for attempt in self._running.values():
            attempt.lost_because = why
            attempt.cancel.set()
        if self._tasks:
            await asyncio.wait(self._tasks)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._flush_remaining(), SHUTDOWN_REPORT_SECONDS)

    async def _shutdown(self, background: list[asyncio.Task[None]]) -> None:
        await self._end_all_attempts("the worker stopped while the attempt ran")
        await self.host.close()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await self.connection.close()

    def _running_attempts(self) -> list[tuple[str, int]]:
        return [(key, attempt.assignment.attempt) for key, attempt in self._running.items()]

    def _finished_attempts(self) -> list[tuple[str, int]]:
        """Ended attempts of this registration whose report is still on its way: a heartbeat
        after an outage names them, so the server does not take them for never delivered."""
        current = self.connection.worker_id
        return [(key, number) for owner, key, number in self._unreported if owner == current]

    # --- claiming and running -------------------------------------------------------------

    async def _claim_loop(self) -> None:
        failures = 0
        while True:
            try:
                assignments, directives = await self.connection.claim(
                    self.config.max_slots, self._running_attempts()
                )
                failures = 0
            except httpx.HTTPError as error:
                if is_gone(error):
                    self._gone.set()
                    return
                failures += 1
                log.warning("claim failed: %s", error)
                await asyncio.sleep(_backoff(failures))
                continue
            self._obey(directives)
            for assignment in assignments:
                self._start(assignment)

    def _start(self, assignment: Assignment) -> None:
        attempt = _Attempt(assignment, self.connection.worker_id)
        self._running[assignment.attempt_id] = attempt
        task = asyncio.create_task(self._run_attempt(attempt), name=assignment.attempt_id)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _obey(self, directives: dict[str, list[str]]) -> None:
        for attempt_id in directives.get("drop", []):
            if attempt := self._running.get(attempt_id):
                log.warning("attempt %s is no longer ours; killing it", attempt_id)
                attempt.dropped = True
                attempt.cancel.set()
        for attempt_id in directives.get("cancel", []):
            if attempt := self._running.get(attempt_id):
                attempt.cancel.stop(AttemptState.CANCELLED, "cancelled")
        for attempt_id in directives.get("preempt", []):
            if attempt := self._running.get(attempt_id):
                log.info("attempt %s is preempted; stopping it", attempt_id)
                attempt.cancel.stop(AttemptState.PREEMPTED, PREEMPTED_REASON)

    async def _run_attempt(self, attempt: _Attempt) -> None:
        assignment = attempt.assignment
        try:
            async with self.host.attempt(assignment) as place:
                outcome = await self._execute(attempt, place)
        except (HerderError, OSError, ValueError, httpx.HTTPError, NetworkUnavailable) as error:
            outcome = not_started(f"could not prepare the attempt: {error}")
        finally:
            del self._running[assignment.attempt_id]
        if not attempt.dropped:
            self._complete(attempt, outcome)

    async def _execute(self, attempt: _Attempt, place: AttemptPlace) -> Outcome:
        """Place the program in the attempt's workspace, then run it there."""
        workspace, uid, sandbox = place.workspace, place.uid, place.sandbox
        spec = attempt.assignment.spec
        program = None
        if spec.artifact is not None:
            cached = await self.cache.path(spec.artifact)
            if spec.runtime is Runtime.ARCHIVE:
                await asyncio.to_thread(unpack_archive, workspace, cached, uid, uid)
            else:
                name = "main.py" if spec.runtime is Runtime.PYTHON else "program"
                await asyncio.to_thread(
                    place_artifact,
                    workspace,
                    cached,
                    name,
                    executable=spec.runtime is Runtime.EXECUTABLE,
                    uid=uid,
                    gid=uid,
                )
                program = Path(name)
        seen_as = SANDBOX_WORKSPACE if sandbox is not None else workspace
        plan = build_plan(
            spec,
            seen_as,
            program,
            attempt_environment(
                attempt.assignment, seen_as, Path("/tmp") if sandbox is not None else seen_as
            ),
            self.config.python,
            spec.timeout_seconds,
            kill_grace_seconds=self.config.kill_grace_seconds,
            limits=limits_for(spec.resources, self.config.max_processes_per_attempt),
            sandbox=sandbox,
            name=attempt.assignment.attempt_id,
        )

        def on_output(stream: str, data: bytes) -> None:
            attempt.output.write(stream, data)
            self._report_needed.set()

        return await execute(plan, on_output, attempt.cancel, self.host.enforcer)

    def _complete(self, attempt: _Attempt, outcome: Outcome) -> None:
        state, reason = outcome.state, outcome.reason
        if attempt.lost_because is not None:
            state, reason = AttemptState.LOST, attempt.lost_because
        assignment = attempt.assignment
        usage = outcome.usage
        self._completions.append(
            (
                attempt.worker_id,
                attempt.output.take(),
                {
                    "attempt_id": assignment.attempt_id,
                    "attempt": assignment.attempt,
                    "outcome": state,
                    "exit_code": outcome.exit_code,
                    "reason": reason,
                    "usage": {
                        "cpu_user_seconds": usage.cpu_user_seconds,
                        "cpu_system_seconds": usage.cpu_system_seconds,
                        "max_rss_kb": usage.max_rss_kb,
                    },
                },
            )
        )
        self._unreported.add((attempt.worker_id, assignment.attempt_id, assignment.attempt))
        self._report_needed.set()
        self._completion_ready.set()

    # --- heartbeats -----------------------------------------------------------------------

    async def _heartbeat_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self._obey(
                    await self.connection.heartbeat(
                        self._running_attempts(), self._finished_attempts()
                    )
                )
                self._server_back.set()
            except httpx.HTTPError as error:
                if is_gone(error):
                    self._gone.set()
                    return
                log.warning("heartbeat failed: %s", error)

    async def _watchdog(self, lease: float) -> None:
        """Kill our attempts once the server has been silent longer than our lease: by then
        it may have given them to another worker (it declares us lost a heartbeat later)."""
        while True:
            await asyncio.sleep(min(1.0, lease / 4))
            silent = time.monotonic() - self.connection.last_contact
            if silent <= lease:
                continue
            for attempt in self._running.values():
                if attempt.lost_because is None:
                    log.warning("no answer from the server for %.0fs: killing attempts", silent)
                    attempt.lost_because = (
                        f"the worker lost contact with the server for over {lease:g}s"
                    )
                    attempt.cancel.set()

    # --- reporting ------------------------------------------------------------------------

    def _collect(self) -> dict[str, _Report]:
        """Everything pending, grouped by the worker id each attempt was given to (a worker
        that registered again still reports its old attempts under the old id)."""
        reports: dict[str, _Report] = defaultdict(_Report)
        for worker_id, attempt_id, number, chunk in self._unsent_logs:
            reports[worker_id].logs.append((attempt_id, number, chunk))
        self._unsent_logs = []
        for attempt_id, attempt in self._running.items():
            if attempt.output.has_pending and not attempt.dropped:
                number = attempt.assignment.attempt
                reports[attempt.worker_id].logs.extend(
                    (attempt_id, number, chunk) for chunk in attempt.output.take()
                )
        for worker_id, final_chunks, completion in self._completions:
            reports[worker_id].logs.extend(
                (completion["attempt_id"], completion["attempt"], chunk) for chunk in final_chunks
            )
            reports[worker_id].completions.append(completion)
        self._completions = []
        return reports

    async def _send(self) -> bool:
        """Everything pending, one request per worker id; what fails is kept for next time."""
        delivered = True
        for worker_id, report in self._collect().items():
            try:
                results = await self.connection.report(worker_id, report.logs, report.completions)
            except httpx.HTTPError as error:
                log.warning("report failed, will retry: %s", error)
                self._unsent_logs += [(worker_id, *item) for item in report.logs]
                self._completions += [(worker_id, [], item) for item in report.completions]
                delivered = False
                continue
            for item in report.completions:  # answered: accepted or refused, not pending
                self._unreported.discard((worker_id, item["attempt_id"], item["attempt"]))
            for result in results:
                if result["status"] != 200:
                    log.warning(
                        "server refused a report for %s: %s", result["attempt_id"], result["detail"]
                    )
                    self._obey({"drop": [result["attempt_id"]]})
        return delivered

    async def _report_loop(self) -> None:
        failures = 0
        while True:
            await self._report_needed.wait()
            self._report_needed.clear()
            self._completion_ready.clear()
            if await self._send():
                failures = 0
                # Completions go at once; output alone waits a little to travel in batches.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._completion_ready.wait(), LOG_FLUSH_SECONDS)
            else:
                failures += 1
                self._report_needed.set()
                self._server_back.clear()
                with contextlib.suppress(TimeoutError):  # back off, unless the server is back
                    await asyncio.wait_for(self._server_back.wait(), _backoff(failures))

    async def _flush_remaining(self) -> None:
        failures = 0
        while self._completions or self._unsent_logs:
            if not await self._send():
                failures += 1
                await asyncio.sleep(_backoff(failures))
