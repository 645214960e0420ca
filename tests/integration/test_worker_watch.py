"""The agent's tasks are watched: one that dies stops the worker loudly (its traceback logged,
no more claims, its attempts killed, ``Agent.run`` raising) instead of working on half-dead,
claiming work it can never report."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from herder.protocol import Report, ReportResults
from herder.worker.agent import Agent
from herder.worker.attempts import AttemptRunner, LiveAttempt
from herder.worker.outcome import Outcome
from herder.worker.process import OutputSink
from herder.worker.reporter import Reporter
from herder.worker.watch import SideTaskDied, TaskWatch, log_task_stacks
from tests.integration.test_worker_agent import FakeServer, assignment, config

WITHIN_SECONDS = 20.0


class AnswersBadly(FakeServer):
    """Answers calls to ``path`` (its last part) with a body the worker cannot read."""

    def __init__(self, path: str, answer: object) -> None:
        super().__init__()
        self.path = path
        self.answer = answer
        self.claims_after_answer = 0
        self.answered = False

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/claim") and self.answered:
            self.claims_after_answer += 1
        if request.url.path.endswith(self.path):
            self.answered = True
            return httpx.Response(200, json=self.answer)
        return await super().handle(request)


def stopped_by_itself(
    server: FakeServer, tmp_path: Path, prepare: Callable[[Agent], None] = lambda _: None
) -> SideTaskDied:
    """Run an agent that nobody stops; what it stopped with."""

    async def main() -> SideTaskDied:
        stop = asyncio.Event()
        agent = Agent(config(tmp_path), httpx.MockTransport(server.handle))
        prepare(agent)
        with pytest.raises(SideTaskDied) as raised:
            async with asyncio.timeout(WITHIN_SECONDS):
                await agent.run(stop)
        assert stop.is_set()
        return raised.value

    return asyncio.run(main())


def test_a_reporter_that_dies_stops_the_worker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = AnswersBadly("/reports", {"results": [{"attempt_id": "att_out"}]})  # no status
    server.to_assign = [assignment("att_out", "echo hi; sleep 30")]
    died = stopped_by_itself(server, tmp_path)
    assert died.name == "reporter"
    assert "the worker's reporter died" in str(died)
    (logged,) = [record for record in caplog.records if "reporter died" in record.getMessage()]
    assert logged.levelno == logging.ERROR
    assert logged.exc_info is not None  # with its traceback
    assert server.claims_after_answer <= 1  # at most the long-poll already under way


def test_a_uid_sweeper_that_dies_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_done", "true")]

    def prepare(agent: Agent) -> None:
        sweep = agent.host.sweeper.sweep

        async def broken_once() -> None:  # the sweep at shutdown works again
            monkeypatch.setattr(agent.host.sweeper, "sweep", sweep)
            raise OSError("cannot read /proc")

        monkeypatch.setattr(agent.host.sweeper, "sweep", broken_once)
        # an attempt that ended with its cgroup empty owes no sweep: this uid's owes one
        agent.host.sweeper.finished(agent.host.uids.acquire())

    died = stopped_by_itself(server, tmp_path, prepare)
    assert died.name == "uid sweeper"
    assert isinstance(died.error, OSError)


def test_a_claim_loop_that_dies_stops_the_worker(tmp_path: Path) -> None:
    server = AnswersBadly("/claim", {"assignments": "none"})
    died = stopped_by_itself(server, tmp_path)
    assert died.name == "claim loop"


def test_an_attempt_task_that_dies_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_bug", "true")]

    async def broken_run(
        _: AttemptRunner, __: LiveAttempt, ___: OutputSink, ____: Callable[[Outcome], None]
    ) -> None:
        raise RuntimeError("a bug in the worker")

    monkeypatch.setattr(AttemptRunner, "run", broken_run)
    died = stopped_by_itself(server, tmp_path)
    assert died.name == "att_bug"
    assert isinstance(died.error, RuntimeError)


def test_the_tasks_stacks_logged_name_each_await_down_to_where_it_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def waits_for_the_server(heard: asyncio.Event) -> None:
        await heard.wait()

    async def drains(heard: asyncio.Event) -> None:
        await waits_for_the_server(heard)

    async def main() -> None:
        heard = asyncio.Event()
        task = asyncio.create_task(drains(heard), name="stopping")
        await asyncio.sleep(0)
        log_task_stacks()
        heard.set()
        await task

    asyncio.run(main())
    (logged,) = [record for record in caplog.records if "asyncio tasks" in record.getMessage()]
    said = logged.getMessage()
    assert "task 'stopping', awaiting:" in said
    where = [said.index(f"in {name}\n") for name in ("drains", "waits_for_the_server", "wait")]
    assert where == sorted(where), said


def test_closing_cancels_again_a_task_that_swallowed_its_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Python 3.11's ``wait_for`` does when a result and the cancel come at once: the task
    goes back to waiting, and closing must not wait for it for ever."""
    monkeypatch.setattr("herder.worker.watch.CANCEL_AGAIN_SECONDS", 0.05)

    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # swallowed once
            await asyncio.Event().wait()
        await asyncio.Event().wait()

    async def close() -> bool:
        watch = TaskWatch(asyncio.Event())
        watch.start("stubborn", stubborn())
        await asyncio.sleep(0)
        async with asyncio.timeout(5):
            await watch.close()
        return not watch.pending

    assert asyncio.run(close())


def test_a_reporter_cancelled_as_a_completion_comes_ends(tmp_path: Path) -> None:
    """The cancel and the wake of its wait for completions in one turn of the loop: the
    reporter ends, rather than going back to wait for work (a worker's stop hung so)."""

    class Server:
        async def report(self, worker_id: str, report: Report) -> ReportResults:
            return ReportResults(results=[])

    async def cancelled_at_once() -> bool:
        reporter = Reporter(Server(), {}, lambda _: None)  # type: ignore[arg-type]
        running = asyncio.create_task(reporter.run())
        reporter.output_written()  # a send, then its wait for completions (a short one)
        for _ in range(5):
            await asyncio.sleep(0)
        reporter._completion_ready.set()
        running.cancel()
        done, _ = await asyncio.wait({running}, timeout=2)
        return running in done and running.cancelled()

    assert asyncio.run(cancelled_at_once())
