"""The worker agent: register, then three loops until told to stop.

    claim loop      long-polls the server for attempts that fit (and for stops)
    heartbeat loop  says "alive, running these" every few seconds; hears stops:
                    cancel and preempt (TERM, grace, KILL; reported apart), drop (kill, silently)
    reporter        sends output and completions, batched, one request in flight at a time

Each claimed attempt runs in its own task: fetch the artifact, mount the attempt's disk and
place the program on it, execute it in its sandbox (own uid, namespaces, file system and
seccomp filter; ``sandbox.py``) within its resource request (cgroups or rlimits, chosen once at
start), report how it ended, clean up.

A root worker keeps its state (``home``, from ``--home``) in root-owned directories no
job can reach (``statedir.py``):

    /var/lib/herder/bin/herder-sandbox-<hash>   the launcher, built once per version and host
    <home>/worker-<uid base>/cache       artifacts by sha256
    <home>/worker-<uid base>/attempts    one disk (tmpfs) per running attempt
    <home>/worker-<uid base>/root        where each launcher mounts its attempt's new root
    <home>/worker-<uid base>/net         network namespaces of network-on attempts
    /run/herder/uids                     which uid ranges this host's workers hold
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
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
from herder.worker.disk import MIB, AttemptDisk, mount_disk, unmount_disk
from herder.worker.executor import Outcome, StopRequest, execute, not_started
from herder.worker.isolation import Isolation
from herder.worker.launcher import sandbox_launcher
from herder.worker.limits import MAX_PROCESSES_PER_ATTEMPT, limits_for
from herder.worker.network import (
    AttemptNetwork,
    NetworkUnavailable,
    OutboundNetworks,
    control_plane_addresses,
)
from herder.worker.output import Chunk, OutputBuffer
from herder.worker.sandbox import (
    SANDBOX_WORKSPACE,
    SYSTEM_DIRECTORIES,
    Sandbox,
    attempt_environment,
    limit_enforcer,
    system_view,
)
from herder.worker.statedir import secure_directory
from herder.worker.uids import UidSweeper, kill_processes_of_uids, reserve_uid_pool
from herder.worker.workspace import (
    build_plan,
    check_plain_name,
    place_artifact,
    prepare_workspace,
    remove_workspace,
    unpack_archive,
)

log = logging.getLogger("herder.worker")

LOG_FLUSH_SECONDS = 0.1  # output is sent at most this often while attempts run
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)  # back-off while the server cannot be reached
SHUTDOWN_REPORT_SECONDS = 5.0
PREEMPTED_REASON = "preempted by a higher-priority run"
UID_LOCKS = Path("/run/herder/uids")  # host-wide: every root worker must see every other's
LAUNCHERS = Path("/var/lib/herder/bin")  # host-wide: built once, whatever a worker's home


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
        self.sandboxed = config.isolation is Isolation.SANDBOX
        if self.sandboxed and os.geteuid() != 0:
            raise SystemExit(
                "a worker sandboxes its attempts only when it runs as root; run it as root, "
                "or pass --isolation none if every job this fleet runs is trusted"
            )
        home = secure_directory(config.home)
        locks = secure_directory(UID_LOCKS) if self.sandboxed else secure_directory(home / "uids")
        self.uids, self._uid_lock = reserve_uid_pool(
            config.run_uid_base, config.run_uid_count, locks
        )
        self.sweeper = UidSweeper(self.uids)
        own = secure_directory(home / f"worker-{self.uids.base}")  # the uid range is ours alone
        self.cache = ArtifactCache(own / "cache", self.connection.download)
        self.workspaces = secure_directory(own / "attempts")
        self.sandbox_root = secure_directory(own / "root", 0o755)
        self.launcher = (
            sandbox_launcher(secure_directory(LAUNCHERS, 0o755)) if self.sandboxed else None
        )
        self.view = system_view(SYSTEM_DIRECTORIES + config.expose)
        if self.sandboxed:  # what a crashed worker of this range left running dies now
            kill_processes_of_uids(self.uids.all_uids())
        self._remove_leftovers()
        self.enforcer = limit_enforcer(f"worker-{self.uids.base}")
        self.networks = self._outbound_networks(own) if self.sandboxed else None
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

    def _outbound_networks(self, own: Path) -> OutboundNetworks | str:
        """Networks for ``network: true`` attempts, or why there are none: such attempts then
        fail with that reason rather than share the worker's network."""
        blocked = [*control_plane_addresses(self.config.server_url), *self.config.block]
        try:
            networks = OutboundNetworks(
                secure_directory(own / "net"), f"w{self.uids.base}", blocked
            )
        except (NetworkUnavailable, OSError) as error:
            log.error("jobs with network: true cannot run here: %s", error)
            return f"this worker cannot give jobs a network: {error}"
        log.info("network: true jobs get outbound access; blocked: %s", ", ".join(blocked))
        return networks

    def _remove_leftovers(self) -> None:
        """Disks and workspaces of a worker of this range that crashed: never reused."""
        for path in self.workspaces.iterdir():
            if path.is_mount():
                unmount_disk(AttemptDisk(path, 0))
            else:
                remove_workspace(path)

    async def run(self, stop: asyncio.Event) -> None:
        background = [
            asyncio.create_task(self._report_loop(), name="reporter"),
            asyncio.create_task(self.sweeper.sweep_forever(), name="uid sweeper"),
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
        await self.sweeper.sweep()
        if isinstance(self.networks, OutboundNetworks):
            await asyncio.to_thread(self.networks.close_all)
        await asyncio.to_thread(self.enforcer.close)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await self.connection.close()
        self._uid_lock.close()

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
        uid = self.uids.acquire() if self.sandboxed else None
        disk: AttemptDisk | None = None
        workspace: Path | None = None
        network: AttemptNetwork | None = None
        try:
            check_plain_name(assignment.attempt_id)
            if uid is not None:
                size = assignment.spec.resources.disk_mb * MIB
                root = self.workspaces / assignment.attempt_id
                disk = await asyncio.to_thread(mount_disk, root, size, uid)
                workspace = disk.work
            else:
                workspace = await asyncio.to_thread(
                    prepare_workspace, self.workspaces, assignment.attempt_id
                )
            if uid is not None and assignment.spec.network:
                network = await self._open_network(assignment.attempt_id)
            outcome = await self._execute(attempt, workspace, uid, disk, network)
        except (HerderError, OSError, ValueError, httpx.HTTPError, NetworkUnavailable) as error:
            outcome = not_started(f"could not prepare the attempt: {error}")
        finally:
            if uid is not None:  # whatever still runs under it dies before it is reused
                self.sweeper.finished(uid)
            if network is not None and isinstance(self.networks, OutboundNetworks):
                await asyncio.to_thread(self.networks.close, network)
            if disk is not None:
                await asyncio.to_thread(unmount_disk, disk)
            elif workspace is not None:
                await asyncio.to_thread(remove_workspace, workspace)
            del self._running[assignment.attempt_id]
        if not attempt.dropped:
            self._complete(attempt, outcome)

    async def _open_network(self, attempt_id: str) -> AttemptNetwork:
        if not isinstance(self.networks, OutboundNetworks):
            raise NetworkUnavailable(self.networks or "this worker gives jobs no network")
        return await asyncio.to_thread(self.networks.open, attempt_id)

    async def _execute(
        self,
        attempt: _Attempt,
        workspace: Path,
        uid: int | None,
        disk: AttemptDisk | None,
        network: AttemptNetwork | None,
    ) -> Outcome:
        """``workspace``: the attempt's working directory on this host."""
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
        sandbox = None
        if self.launcher is not None and uid is not None and disk is not None:
            sandbox = Sandbox(
                self.launcher,
                uid,
                self.sandbox_root,
                disk,
                self.view,
                net_namespace=network.namespace if network is not None else None,
                resolv_conf=network.resolv_conf if network is not None else None,
                gpu_indices=tuple(attempt.assignment.gpu_indices),
            )
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

        return await execute(plan, on_output, attempt.cancel, self.enforcer)

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
