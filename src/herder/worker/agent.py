"""The worker agent: register, then work as that registered worker until told to stop.

    claim loop      holds the worker's stream open, on which the server pushes attempts
                    placed here (and stops); or, where the server has no stream, long-polls
    heartbeat loop  says "alive, running these" every few seconds; hears stops:
                    cancel and preempt (TERM, grace, KILL; reported apart), drop (kill, silently)
    watchdog        kills the attempts once the server has been silent past the lease
    reporter        sends output and completions (``reporter.py``)

Each claimed attempt runs in its own task (``attempts.py``): fetch the artifact, mount the
attempt's disk and place the program on it, execute it in its sandbox (own uid, namespaces,
file system and seccomp filter; ``sandbox.py``) within its resource request (cgroups or
rlimits, chosen once at start), report how it ended, clean up. Where attempts run on this host
(state directories, uids, disks, networks) is ``host.py``'s. Every task the agent starts is
watched (``watch.py``): one that dies stops the worker loudly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from pydantic import ValidationError

from herder import __version__
from herder.domain.images import ISOLATION_LABEL, REGISTRIES_VARIABLE, parse_registries
from herder.domain.jobs import MAX_STOP_GRACE_SECONDS, Capacity
from herder.domain.models import Assignment
from herder.domain.states import AttemptState
from herder.protocol import ClaimReply, Directives, Heartbeat, RegisterReply, RegisterRequest
from herder.telemetry import traces, tracing
from herder.telemetry.trace_ids import ATTEMPT
from herder.worker.address import local_address
from herder.worker.attempts import AttemptRunner, LiveAttempt
from herder.worker.cache import ArtifactCache
from herder.worker.cgroup_pool import READY_CGROUPS
from herder.worker.connection import RegistrationOver, ServerConnection, described
from herder.worker.host import AttemptHost
from herder.worker.images import DEFAULT_CACHE_BYTES, ImageStore
from herder.worker.intake import Intake
from herder.worker.isolation import Isolation
from herder.worker.limits import MAX_PROCESSES_PER_ATTEMPT
from herder.worker.outcome import Outcome
from herder.worker.registry_auth import RegistryCredentials
from herder.worker.reporter import Reporter, backoff
from herder.worker.started import StartedAttempts
from herder.worker.watch import TaskWatch, first_of

log = logging.getLogger("herder.worker")

SHUTDOWN_REPORT_SECONDS = 5.0
STOP_PATIENCE_SECONDS = 10.0  # past its stop grace, an attempt stopped is slow to end
# What a stopped worker's attempts end with (preempted: their runs are queued again in their
# place, no try used, a checkpoint saved where the job keeps one)
WORKER_STOPPED_REASON = "its worker stopped"
# A worker does not know why the dispatcher stops an attempt; the server records why it did.
PREEMPTED_REASON = "preempted"


@dataclass(frozen=True)
class WorkerConfig:
    server_url: str
    token: str
    name: str
    capacity: Capacity
    home: Path
    python: str
    max_slots: int = 256
    labels: dict[str, str] = field(default_factory=dict)  # and its isolation, registered as a label
    run_uid_base: int = 61000
    run_uid_count: int = 4096
    max_stop_grace_seconds: float = MAX_STOP_GRACE_SECONDS  # caps jobs' stop_grace_seconds
    address: str = ""  # where gang peers reach this worker; "" finds it (see address.py)
    max_processes_per_attempt: int = MAX_PROCESSES_PER_ATTEMPT
    isolation: Isolation = Isolation.SANDBOX
    ready_cgroups: int = READY_CGROUPS  # attempts' cgroups made ahead, in the sandbox
    expose: tuple[str, ...] = ()  # more host directories attempts see, read-only
    block: tuple[str, ...] = ()  # more destinations network-on attempts must not reach
    allow_cidr: tuple[str, ...] = ()  # private or special ranges network-on attempts may reach
    # The attempts still running when it stops end ``cancelled`` with this reason (herder
    # up's own worker: the whole system stops on purpose); None: they are stopped as
    # ``preempted``, and their runs go back to the queue in their place, no try used.
    shutdown_reason: str | None = None
    # Stopping, it takes nothing new (the server drains it) and gives what runs this long to
    # end by itself before it is stopped; a second signal cuts the wait short.
    drain_seconds: float = 0.0
    # where runtime image jobs' images may come from (HERDER_IMAGE_REGISTRIES, as the server's)
    image_registries: tuple[str, ...] = field(
        default_factory=lambda: parse_registries(os.environ.get(REGISTRIES_VARIABLE, ""))
    )
    image_cache_bytes: int = DEFAULT_CACHE_BYTES  # its image roots' bound, together
    # how it signs in to those registries, by base URL (HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE)
    image_credentials: dict[str, RegistryCredentials] = field(default_factory=dict)
    ca_file: Path | None = None  # an https server's certificate authority, when not the system's
    # Take work on the worker's stream where the server has one; else (or False) long-poll
    # claims and send each report as a request.
    stream: bool = True


class Agent:
    _attempts: TaskWatch  # one task per claimed attempt, watched; made by ``run``
    _side: TaskWatch  # the reporter and the uid sweeper, watched; made by ``run``

    def __init__(
        self, config: WorkerConfig, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        """``transport``: how to reach the server, when not over the network (tests)."""
        self.config = config
        self.connection = ServerConnection(
            config.server_url, config.token, transport, ca_file=config.ca_file
        )
        self.host = AttemptHost(
            config.home,
            config.isolation,
            uid_base=config.run_uid_base,
            uid_count=config.run_uid_count,
            server_url=config.server_url,
            ready_cgroups=config.ready_cgroups,
            expose=config.expose,
            block=config.block,
            allow_cidr=config.allow_cidr,
        )
        self.address = config.address or local_address(config.server_url)
        artifacts = ArtifactCache(self.host.state / "cache", self.connection.download)
        images = ImageStore(
            self.host.state / "images",
            artifacts,
            config.image_registries,
            cache_bytes=config.image_cache_bytes,
            credentials=config.image_credentials,
        )
        self.runner = AttemptRunner(
            self.host,
            artifacts,
            config.python,
            config.max_stop_grace_seconds,
            config.max_processes_per_attempt,
            # checkpoints go through the connection's upload_checkpoint / download_checkpoint
            self.connection,
            images,
        )
        self._running: dict[str, LiveAttempt] = {}
        self._started = StartedAttempts()
        self.reporter = Reporter(
            self.connection, self._running, self._drop, room=self._room, start=self._start
        )
        self._gone = asyncio.Event()
        self._leaving = False  # stopping: the server is told to place nothing more here
        self._hurry = asyncio.Event()  # a second signal: stop what runs now
        self._handed_in_reports = False  # the server may hand over attempts in a report's reply
        self._streams = False  # this registration takes its work on a stream

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set. A task of the agent that dies sets it too: the agent
        kills and reports its attempts where it still can, then raises ``SideTaskDied``."""
        side = self._side = TaskWatch(stop)
        self._attempts = TaskWatch(stop)
        side.start("reporter", self.reporter.run())
        side.start("uid sweeper", self.host.sweeper.sweep_forever())
        try:
            while not stop.is_set():
                registration = await self._register(stop)
                if registration is None or not await self._session(registration, stop):
                    break
                log.warning("the server declared this worker lost: killing its attempts")
                await self._end_all_attempts("the server declared the worker lost")
        finally:
            await self._shutdown(side)
        death = side.death or self._attempts.death
        if death is not None:
            raise death

    async def _register(self, stop: asyncio.Event) -> RegisterReply | None:
        config, failures = self.config, 0
        request = RegisterRequest(
            name=config.name,
            capacity=config.capacity,
            max_slots=config.max_slots,
            labels={**config.labels, ISOLATION_LABEL: config.isolation.value},
            version=__version__,
            address=self.address,
        )
        while not stop.is_set():
            try:
                registration = await self.connection.register(request)
                log.info(
                    "registered with %s as %s, reachable at %s",
                    config.server_url,
                    registration.worker_id,
                    self.address,
                )
                return registration
            except httpx.HTTPStatusError as error:
                if error.response.status_code in (401, 403):
                    raise SystemExit(f"the server refused the worker token: {error}") from error
                log.warning("cannot register yet: %s", error)
            except httpx.TransportError as error:
                log.warning("cannot reach %s yet: %s", config.server_url, error)
            failures += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff(failures)):
                    await stop.wait()
        return None

    async def _session(self, registration: RegisterReply, stop: asyncio.Event) -> bool:
        """Work as one registered worker until told to stop (``False``) or declared lost
        (``True``: register again). A loop that dies stops the agent (``SideTaskDied``)."""
        self._gone.clear()
        self._handed_in_reports = registration.hands_over_in_reports
        self._streams = registration.streams and self.config.stream and self.connection.streams
        interval = registration.heartbeat_interval_seconds
        lease = max(interval, registration.heartbeat_timeout_seconds - interval)
        loops = TaskWatch(stop)
        loops.start("claim loop", self._claim_loop(), may_return=True)  # returns when gone
        loops.start("heartbeat loop", self._heartbeat_loop(interval), may_return=True)
        loops.start("watchdog", self._watchdog(lease))
        try:
            await first_of(stop, self._gone)
            if not self._gone.is_set():
                if any(watch.death for watch in (self._side, self._attempts, loops)):
                    await loops.close()  # a task died: take nothing more, placed before or not
                else:
                    await self._drain()  # stopping on purpose: heartbeats go on meanwhile
                await self._end_remaining()
        finally:
            await loops.close()
        if loops.death is not None:
            raise loops.death
        return self._gone.is_set() and not stop.is_set()

    def hurry(self) -> None:
        """Stop what still runs now rather than at the end of the drain."""
        self._hurry.set()

    async def _drain(self) -> None:
        """Stopping: tell the server at once to place nothing more here (its next claim and
        heartbeats say so too), then give what runs ``drain_seconds`` to end by itself."""
        self._leaving = True
        with contextlib.suppress(httpx.HTTPError, RegistrationOver):
            self._obey(await self.connection.heartbeat(self._heartbeat()))
            if self.config.shutdown_reason is None:
                try:
                    await self._take_what_was_placed()
                except ValidationError as error:  # a claim loop that died of it stops us
                    log.warning("could not take what was placed before the stop: %s", error)
        seconds = self.config.drain_seconds
        if not self._running or seconds <= 0 or self.config.shutdown_reason is not None:
            return
        log.info("stopping: what runs gets up to %gs to end; nothing new is taken", seconds)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._until_idle()
        if self._running:
            log.info("the drain is over: stopping the %d attempts still running; their runs "
                     "are queued again", len(self._running))  # fmt: skip

    async def _take_what_was_placed(self) -> None:
        """Once the server has heard that this worker leaves, it places nothing more here; what
        it placed before and has not handed over yet is taken now, with a claim that does not
        wait, to run in the drain (or be stopped as a preemption, its run queued again). Left
        behind, it would be lost with the worker, and its run with it."""
        running = [attempt.held for attempt in self._running.values()]
        reply = await self.connection.claim(
            self.config.max_slots, running, leaving=True, wait_seconds=0
        )
        self._take(reply)

    async def _until_idle(self) -> None:
        """Until nothing runs here (an attempt placed before the drain took, too), the
        registration is over, or a second signal hurries the stop."""
        while self._running and not self._gone.is_set() and not self._hurry.is_set():
            await asyncio.sleep(0.1)

    async def _end_all_attempts(self, why: str, end: AttemptState | None = None) -> None:
        """Stop every attempt and report it ``end`` (None: kill it and report it ``lost``)
        with ``why``, unless it ended by itself first, under the worker id they were given
        to: the server refuses (and records) reports of attempts it has given to others."""
        for attempt in self._running.values():
            if end is None:
                attempt.lose(why)
            else:
                attempt.stop.stop(end, why)
        if self._attempts.pending:
            patience = self.config.max_stop_grace_seconds + STOP_PATIENCE_SECONDS
            _, late = await asyncio.wait(self._attempts.pending, timeout=patience)
            if late:  # said, to be looked into: they still end before the worker does
                log.warning("%d attempts have not ended %gs after they were stopped",
                            len(late), patience)  # fmt: skip
                await asyncio.wait(late)
        try:
            async with asyncio.timeout(SHUTDOWN_REPORT_SECONDS):
                await self.reporter.flush()
        except TimeoutError:
            log.warning("%d attempts' reports were not delivered within %gs: the server "
                        "takes them for lost once this worker's heartbeats stop",
                        len(self.reporter.unreported(self.connection.worker_id)),
                        SHUTDOWN_REPORT_SECONDS)  # fmt: skip

    async def _shutdown(self, side: TaskWatch) -> None:
        try:
            await self._end_remaining()
            await self.host.close()
        finally:
            await side.close()
            await self.connection.close()
        log.info("stopped")

    async def _end_remaining(self) -> None:
        """The worker stops: what still runs ends cancelled with the shutdown reason (herder
        up's own worker), else preempted (its run goes back to the queue, no try used)."""
        reason = self.config.shutdown_reason
        if reason is None:
            await self._end_all_attempts(self._stopped_reason(), AttemptState.PREEMPTED)
        else:
            await self._end_all_attempts(reason, AttemptState.CANCELLED)

    def _stopped_reason(self) -> str:
        drained = self.config.drain_seconds
        if drained > 0 and not self._hurry.is_set():
            return f"{WORKER_STOPPED_REASON} after a {drained:g}s drain"
        return WORKER_STOPPED_REASON

    def _heartbeat(self) -> Heartbeat:
        """What this registration holds: its running attempts, and its ended ones whose
        report is still on its way (after an outage the server must not take them for never
        delivered)."""
        return Heartbeat(
            running=[attempt.held for attempt in self._running.values()],
            finished=self.reporter.unreported(self.connection.worker_id),
            leaving=self._leaving or None,
        )

    # --- claiming and running -------------------------------------------------------------

    async def _claim_loop(self) -> None:
        """Take work until the registration is over (``intake.py``)."""
        intake = Intake(
            self.connection,
            self.config.max_slots,
            take=self._take,
            holding=lambda: [attempt.held for attempt in self._running.values()],
            leaving=lambda: self._leaving,
        )
        try:
            await intake.run(self._streams)
        except RegistrationOver:
            self._gone.set()

    def _take(self, reply: ClaimReply) -> None:
        """A claim's answer, or a push on the stream: stop what it says, start what it gives."""
        self._obey(reply)
        for assignment in reply.assignments:
            self._start(assignment)

    def _room(self, worker_id: str) -> int:
        """How many attempts a report of this registration may be handed (none while
        stopping, for an older registration, or when its server does not hand over so)."""
        if not self._handed_in_reports or self._leaving or worker_id != self.connection.worker_id:
            return 0
        return max(0, self.config.max_slots - len(self._running))

    def _start(self, assignment: Assignment) -> None:
        if not self._started.first_start(assignment.attempt_id):
            # a claim's answer came so late that the server, not hearing of the attempt in
            # our heartbeats, handed it over again: it runs (or ran) here once
            log.info("attempt %s was handed over again; it is already ours", assignment.attempt_id)
            return
        attempt = LiveAttempt(assignment, self.connection.worker_id)
        self._running[assignment.attempt_id] = attempt
        self._attempts.start(assignment.attempt_id, self._run_attempt(attempt), may_return=True)

    def _drop(self, attempt_id: str) -> None:
        if attempt := self._running.get(attempt_id):
            log.warning("attempt %s is no longer ours; killing it", attempt_id)
            attempt.dropped = True
            attempt.stop.set()

    def _obey(self, directives: Directives) -> None:
        for attempt_id in directives.drop:
            self._drop(attempt_id)
        for attempt_id in directives.cancel:
            if attempt := self._running.get(attempt_id):
                attempt.stop.stop(AttemptState.CANCELLED, "cancelled")
        for attempt_id in directives.preempt:
            if attempt := self._running.get(attempt_id):
                log.info("attempt %s is preempted; stopping it", attempt_id)
                attempt.stop.stop(AttemptState.PREEMPTED, PREEMPTED_REASON)

    async def _run_attempt(self, attempt: LiveAttempt) -> None:
        def on_output(stream: str, data: bytes) -> None:
            attempt.output.write(stream, data)
            self.reporter.output_written()

        taken = datetime.now(UTC)

        def on_end(outcome: Outcome) -> None:
            self._running.pop(attempt.assignment.attempt_id, None)
            if not attempt.dropped:
                completion = attempt.completion(outcome)
                traces.attempt_ran(
                    attempt.assignment, attempt.worker_id, taken, datetime.now(UTC),
                    str(completion.outcome), completion.exit_code, completion.reason,
                )  # fmt: skip
                self.reporter.complete(attempt, completion)

        its_span = (ATTEMPT, attempt.assignment.attempt_id)
        try:  # its log lines carry its run's trace id
            with tracing.within(traces.within_attempt(attempt.assignment), its_span):
                await self.runner.run(attempt, on_output, on_end)
        finally:
            self._running.pop(attempt.assignment.attempt_id, None)

    # --- heartbeats -----------------------------------------------------------------------

    async def _heartbeat_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self._obey(await self.connection.heartbeat(self._heartbeat()))
                self.reporter.server_answered()
            except RegistrationOver:
                self._gone.set()
                return
            except httpx.HTTPError as error:
                log.warning("heartbeat failed: %s", described(error))

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
                    attempt.lose(f"the worker lost contact with the server for over {lease:g}s")
