"""One claimed attempt on this worker: what the agent knows of it while it runs, how it is run
(its program placed in its workspace, then executed there in its sandbox) and how its end is
reported (the executor's ``Outcome`` becomes the protocol's ``Completion``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from herder.domain.errors import HerderError
from herder.domain.jobs import Runtime
from herder.domain.models import Assignment
from herder.domain.states import AttemptState
from herder.protocol import MAX_REASON_CHARS, Completion, HeldAttempt, Usage
from herder.worker.cache import ArtifactCache
from herder.worker.checkpoints import REQUEST_NAME, Checkpoints, CheckpointTransfer, SaveWatch
from herder.worker.disk import MIB
from herder.worker.executor import StopRequest, execute
from herder.worker.host import AttemptHost, AttemptPlace
from herder.worker.images import BuildCharge, ImageStore, PreparedImage
from herder.worker.limits import Confinement, Limits, limits_for
from herder.worker.network import NetworkUnavailable
from herder.worker.outcome import Outcome, not_started
from herder.worker.output import OutputBuffer
from herder.worker.process import OutputSink
from herder.worker.sandbox import SANDBOX_CHECKPOINT, SANDBOX_WORKSPACE, attempt_environment
from herder.worker.task_files import OutputRefused, read_output, write_inputs
from herder.worker.unpacker import unpack_here, unpack_in_attempt
from herder.worker.workspace import build_plan, place_artifact

# What keeps an attempt from starting, rather than a fault of the worker: the attempt fails.
log = logging.getLogger("herder.worker")

NO_IMAGE_WITHOUT_SANDBOX = (
    "runtime image runs only on a sandboxed worker: at isolation none there is no root of "
    "its own to give it"
)
PREPARATION_ERRORS = (HerderError, OSError, ValueError, httpx.HTTPError, NetworkUnavailable)


@dataclass
class LiveAttempt:
    assignment: Assignment
    worker_id: str  # the registration it was given to
    output: OutputBuffer = field(default_factory=OutputBuffer)
    stop: StopRequest = field(default_factory=StopRequest)
    dropped: bool = False  # no longer ours: kill it, report nothing
    lost_because: str | None = None  # killed because the worker stops or lost the server
    image_build: BuildCharge = field(default_factory=BuildCharge)  # its image's, if it built it

    @property
    def held(self) -> HeldAttempt:
        return HeldAttempt(attempt_id=self.assignment.attempt_id, attempt=self.assignment.attempt)

    def lose(self, why: str) -> None:
        """Kill it, to be reported ``lost`` with ``why``."""
        self.lost_because = why
        self.stop.set()

    def completion(self, outcome: Outcome) -> Completion:
        state, reason = outcome.state, outcome.reason
        if self.lost_because is not None:
            state, reason = AttemptState.LOST, self.lost_because
        usage = outcome.usage
        output = outcome.output if state is AttemptState.SUCCEEDED else None
        return Completion(
            attempt_id=self.assignment.attempt_id,
            attempt=self.assignment.attempt,
            outcome=state,
            exit_code=outcome.exit_code,
            reason=reason[:MAX_REASON_CHARS],
            usage=Usage(
                cpu_user_seconds=usage.cpu_user_seconds + self.image_build.user_seconds,
                cpu_system_seconds=usage.cpu_system_seconds + self.image_build.system_seconds,
                max_rss_kb=usage.max_rss_kb,
            ),
            output=output,
            stopped_by=outcome.stopped_by,
            checkpoint_refused=_cut(outcome.checkpoint_refused),
        )


@dataclass(frozen=True)
class AttemptRunner:
    """Runs attempts on this host, as the worker's configuration says."""

    host: AttemptHost
    cache: ArtifactCache
    python: str  # the interpreter of python jobs
    max_stop_grace_seconds: float  # the operator's cap on a job's stop_grace_seconds
    max_processes: int
    transfer: CheckpointTransfer  # checkpoints to and from the server
    images: ImageStore  # runtime image: roots built from images, once

    async def run(
        self, attempt: LiveAttempt, on_output: OutputSink, on_end: Callable[[Outcome], None]
    ) -> None:
        """Prepare the attempt's place, run it there, take the place back. ``on_end`` hears
        how it ended as soon as it has — its processes are gone — before the place is taken
        back: removing a workspace can wait on the disk, and the report need not."""
        ended = False

        def end(outcome: Outcome) -> None:
            nonlocal ended
            ended = True
            on_end(outcome)

        try:
            async with self.host.attempt(attempt.assignment) as place:
                outcome = await self._execute(attempt, place, on_output)
                place.contained = outcome.contained
                end(outcome)
        except PREPARATION_ERRORS as error:
            if not ended:
                end(not_started(f"could not prepare the attempt: {error}"))
            else:
                log.warning("attempt %s: its place was not all taken back: %s",
                            attempt.assignment.attempt_id, error)  # fmt: skip

    async def _execute(
        self, attempt: LiveAttempt, place: AttemptPlace, on_output: OutputSink
    ) -> Outcome:
        """Place the program (or, in the attempt's limits, unpack its archive), the run's
        checkpoint and the task's inputs in the attempt's place, run it there (saving its
        checkpoint as it asks, and at its end), then read its output if it succeeded. An
        image job runs on its image's root, held (never evicted) until it is over."""
        if attempt.assignment.spec.runtime is not Runtime.IMAGE:
            return await self._run_in(attempt, place, on_output, None)
        if place.sandbox is None:
            return not_started(NO_IMAGE_WITHOUT_SANDBOX)
        async with contextlib.AsyncExitStack() as held:
            image = await self._prepare_image(attempt, held)
            if image is None:
                return not_started(f"{attempt.stop.reason} before it started", attempt.stop.state)
            return await self._run_in(attempt, _on_image(place, image), on_output, image)

    async def _run_in(
        self,
        attempt: LiveAttempt,
        place: AttemptPlace,
        on_output: OutputSink,
        image: PreparedImage | None,
    ) -> Outcome:
        spec = attempt.assignment.spec
        program = await self._place_program(attempt.assignment, place)
        archive = None
        if spec.runtime is Runtime.ARCHIVE and spec.artifact is not None:
            archive = await self.cache.path(spec.artifact)
        seen_as = SANDBOX_WORKSPACE if place.sandbox is not None else place.workspace
        temporary = Path("/tmp") if place.sandbox is not None else seen_as
        limits = limits_for(spec.resources, self.max_processes)
        checkpoints = self._checkpoints(attempt, place, limits)
        checkpoint_seen_as = SANDBOX_CHECKPOINT if place.sandbox is not None else place.checkpoint
        plan = build_plan(
            spec,
            seen_as,
            program,
            attempt_environment(
                attempt.assignment,
                seen_as,
                temporary,
                (checkpoint_seen_as, seen_as / REQUEST_NAME),
                image.config if image is not None else None,
            ),
            self.python,
            spec.timeout_seconds,
            max_stop_grace_seconds=self.max_stop_grace_seconds,
            limits=limits,
            sandbox=place.sandbox,
            name=attempt.assignment.attempt_id,
            image=image.config if image is not None else None,
        )

        watching: list[SaveWatch] = []

        async def prepare(confinement: Confinement | None) -> str | None:
            """The archive first: the inputs' file is never one an archive brought."""
            checkpoints.confinement = confinement
            if archive is not None:
                refused = await self._unpack(attempt, place, archive, confinement, limits)
                if refused is not None:
                    return refused
            if attempt.assignment.checkpoint is not None:
                refused = await checkpoints.restore(attempt.assignment.checkpoint)
                if refused is not None:
                    return refused
            task = attempt.assignment.task
            if task is not None:
                await asyncio.to_thread(write_inputs, place.workspace, place.uid, task.inputs)
            interval = spec.checkpoint_interval_seconds
            note = lambda line: on_output("stderr", line.encode())  # noqa: E731
            watching.append(SaveWatch(checkpoints, interval, note))
            watching[0].start()
            return None

        async def settle() -> None:
            """No more saves while it runs; one under way finishes."""
            if watching:
                await watching[0].stop()

        async def conclude(outcome: Outcome) -> Outcome:
            """Its last save, once it is over."""
            gone = attempt.dropped or attempt.lost_because is not None
            if gone or checkpoints.is_empty():
                return outcome
            return replace(outcome, checkpoint_refused=await checkpoints.save())

        plan = replace(plan, launcher=place.launcher)
        try:
            outcome = await execute(
                plan, on_output, attempt.stop, self.host.enforcer, prepare, settle, conclude
            )
        finally:
            for watch in watching:  # when the job never started, or the output sink failed
                watch.cancel()
        if outcome.state is not AttemptState.SUCCEEDED:
            return outcome
        try:
            return replace(outcome, output=read_output(place.workspace))
        except OutputRefused as refused:
            return replace(outcome, state=AttemptState.FAILED, reason=str(refused))

    async def _prepare_image(
        self, attempt: LiveAttempt, held: contextlib.AsyncExitStack
    ) -> PreparedImage | None:
        """Its image's root, held until ``held`` closes, or None when it was stopped first
        (a fetch can take a while)."""
        holding = self.images.holding(attempt.assignment.spec, attempt.image_build)
        preparing = asyncio.ensure_future(held.enter_async_context(holding))
        stopped = asyncio.ensure_future(attempt.stop.wait())
        try:
            await asyncio.wait({preparing, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not preparing.done():
                preparing.cancel()  # a root being built in its thread is finished and kept
        return preparing.result() if preparing.done() and not preparing.cancelled() else None

    def _checkpoints(
        self, attempt: LiveAttempt, place: AttemptPlace, limits: Limits
    ) -> Checkpoints:
        assignment = attempt.assignment
        return Checkpoints(
            assignment.attempt_id,
            assignment.attempt,
            self.transfer,
            self.host.checkpoints,
            place.checkpoint,
            place.workspace / REQUEST_NAME,
            assignment.spec.checkpoint_mb * MIB,
            place.sandbox,
            limits.memory_bytes,
        )

    async def _place_program(self, assignment: Assignment, place: AttemptPlace) -> Path | None:
        """The artifact in the workspace as the program to run (an archive is unpacked
        later, in the attempt's limits)."""
        spec, uid = assignment.spec, place.uid
        if spec.artifact is None or spec.runtime in (Runtime.ARCHIVE, Runtime.IMAGE):
            return None
        cached = await self.cache.path(spec.artifact)
        name = "main.py" if spec.runtime is Runtime.PYTHON else "program"
        executable = spec.runtime is Runtime.EXECUTABLE
        await asyncio.to_thread(
            place_artifact, place.workspace, cached, name, executable=executable, uid=uid, gid=uid
        )
        return Path(name)

    @staticmethod
    async def _unpack(
        attempt: LiveAttempt,
        place: AttemptPlace,
        cached: Path,
        confinement: Confinement | None,
        limits: Limits,
    ) -> str | None:
        """Sandboxed, as the attempt, in its limits; at isolation none, here."""
        spec = attempt.assignment.spec
        if place.sandbox is None:
            disk_mb = spec.resources.disk_mb
            return await asyncio.to_thread(unpack_here, place.workspace, cached, disk_mb)
        return await unpack_in_attempt(
            cached,
            place.sandbox.disk,
            place.sandbox.uid,
            confinement,
            limits,
            spec.timeout_seconds,
            attempt.stop,
        )


def _on_image(place: AttemptPlace, image: PreparedImage) -> AttemptPlace:
    """The attempt's place with the image's root as its ``/`` and its working directory."""
    assert place.sandbox is not None  # checked by the caller
    working_dir = Path(image.config.working_dir or SANDBOX_WORKSPACE)
    sandbox = replace(place.sandbox, image_root=image.root, working_dir=working_dir)
    return replace(place, sandbox=sandbox)


def _cut(reason: str | None) -> str | None:
    return reason[:MAX_REASON_CHARS] if reason is not None else None
