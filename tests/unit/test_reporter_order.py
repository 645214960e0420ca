"""The reporter sends a backlog of output a request at a time, and a quiet attempt's end that
comes meanwhile goes in the next request, not behind the rest of the backlog."""

from __future__ import annotations

import asyncio

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.models import Assignment
from herder.protocol import Completion, Report, ReportResults
from herder.worker.attempts import LiveAttempt
from herder.worker.reporter import REPORT_BUDGET_BYTES, Reporter


def live(attempt_id: str) -> LiveAttempt:
    spec = JobSpec(runtime=Runtime.SHELL, command="true")
    given = Assignment(
        attempt_id=attempt_id, attempt=1, run_id="run_1", tenant_id="ten_1",
        idempotency_key=None, spec=spec,
    )  # fmt: skip
    return LiveAttempt(given, "wrk_1")


def ended(attempt_id: str) -> Completion:
    return Completion.model_validate({"attempt_id": attempt_id, "attempt": 1, "outcome": "failed"})


class Server:
    """Takes a report at a time; the first waits until ``release``."""

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self.first_arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def report(self, worker_id: str, report: Report) -> ReportResults:
        self.reports.append(report)
        self.first_arrived.set()
        await self.release.wait()
        return ReportResults(results=[])


def test_a_quiet_attempts_end_overtakes_another_attempts_backlog_of_output() -> None:
    async def go() -> list[Report]:
        server = Server()
        loud, quiet = live("att_loud"), live("att_quiet")
        loud.output.write("stdout", b"x" * (REPORT_BUDGET_BYTES * 4))
        reporter = Reporter(server, {}, lambda _: None)  # type: ignore[arg-type]
        reporter.complete(loud, ended("att_loud"))
        sending = asyncio.create_task(reporter.flush())
        await server.first_arrived.wait()
        reporter.complete(quiet, ended("att_quiet"))
        server.release.set()
        await sending
        return server.reports

    reports = asyncio.run(go())
    assert len(reports) > 3
    assert [item.attempt_id for item in reports[1].completions] == ["att_quiet"]
    assert [item.attempt_id for item in reports[-1].completions] == ["att_loud"]
    assert reports[-1].logs  # its own last words go with it, after all the rest of them
