"""OpenTelemetry traces (docs/traces.md), read by a real OTLP/HTTP receiver in the test: the
API in-process over a fresh store (both stores), a dispatcher's passes, the worker protocol
spoken by hand, and the spans exported by the SDK's batch processor as a collector gets
them. The worker agent's own attempt span is recorded here as the agent records it
(``traces.attempt_ran``); tests/system/test_traces.py has a real agent record it."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.control.dispatcher import Dispatcher
from herder.control.reaper import Reaper
from herder.domain.models import Assignment
from herder.settings import Settings
from herder.store.store import Store
from herder.telemetry import trace_ids, traces, tracing
from herder.telemetry.tracing import Hung
from tests.integration.conftest import Api
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_hand_off import reported
from tests.integration.test_worker_protocol import claim, completion, report
from tests.integration.test_workflows import chain, job, run_of, start, workflow
from tests.otlp_receiver import ReceivedSpan, Receiver, otlp_receiver

LIFE = ("submit", "placement", "hand-over", "attempt", "report", "run")


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """Tracing on, pointed at a receiver of the test's own."""
    with otlp_receiver() as (received, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms: the batch sent soon
        assert tracing.configure("api")
        try:
            yield received
        finally:
            tracing.shutdown()


def _api(store: Store, tmp_path: Path) -> Iterator[Api]:
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    settings = Settings(home=tmp_path, database_url=store.database.url)
    with TestClient(create_app(store, settings)) as http:
        yield Api(http, store, bootstrap.admin_key, bootstrap.worker_token, bootstrap.tenant.id)


@pytest.fixture
def traced(receiver: Receiver, store: Store, tmp_path: Path) -> Iterator[Api]:
    """The API, made while tracing is on (its request spans' middleware is installed)."""
    yield from _api(store, tmp_path)


def ran(assignment: dict[str, Any], worker_id: str, outcome: str = "succeeded") -> None:
    """The worker's attempt span, as the agent records it when the attempt ends."""
    now = datetime.now(UTC)
    taken = Assignment.model_validate(assignment)
    traces.attempt_ran(taken, worker_id, now, now, outcome, 0 if outcome == "succeeded" else 1, "")


def spans_of(receiver: Receiver, run_id: str, *names: str) -> dict[str, list[ReceivedSpan]]:
    tracing.flush()
    return receiver.wait_for(*names, run_id=run_id)


def one(spans: dict[str, list[ReceivedSpan]], name: str) -> ReceivedSpan:
    (span,) = spans[name]
    return span


def test_a_one_off_run_s_life_is_one_trace_under_its_run(traced: Api, receiver: Receiver) -> None:
    job_id = traced.create_job("hello")["id"]
    worker_id = register_worker(traced)
    run_id = traced.start_run(job_id)["id"]
    (assignment,) = claim(traced, worker_id)["assignments"]
    ran(assignment, worker_id)
    reported(traced, worker_id, assignment)

    spans = spans_of(receiver, run_id, *LIFE)
    run = one(spans, "run")
    assert run.parent_span_id == ""  # a one-off run is its trace's root
    assert run.trace_id == f"{trace_ids.trace_id(run_id):032x}"
    assert run.span_id == f"{trace_ids.span_id(trace_ids.RUN, run_id):016x}"
    assert {span.trace_id for found in spans.values() for span in found} == {run.trace_id}
    for name in ("submit", "placement", "hand-over", "attempt"):
        assert one(spans, name).parent_span_id == run.span_id, name
    attempt, report_span = one(spans, "attempt"), one(spans, "report")
    assert report_span.parent_span_id == attempt.span_id  # the report of that attempt
    assert run.attributes["herder.run.state"] == "succeeded"
    submit = one(spans, "submit")
    assert submit.attributes["herder.job.id"] == job_id
    assert submit.attributes["herder.tenant.id"] == traced.tenant_id
    assert submit.attributes["herder.run.state"] == "queued"
    placement = one(spans, "placement")
    assert placement.attributes["herder.worker.id"] == worker_id
    assert placement.attributes["herder.attempt.number"] == 1
    assert one(spans, "hand-over").attributes["herder.attempt.id"] == assignment["attempt_id"]
    assert report_span.attributes["herder.attempt.outcome"] == "succeeded"
    assert report_span.attributes["herder.report.receipt"] == "applied"
    # in the order it happened, all within the run's span
    assert run.start_ns <= submit.start_ns <= placement.end_ns <= report_span.start_ns
    assert report_span.end_ns <= run.end_ns
    assert placement.start_ns <= placement.end_ns


def test_a_retry_is_a_further_attempt_in_the_same_trace(traced: Api, receiver: Receiver) -> None:
    job_id = traced.create_job("flaky", retry={"max_attempts": 2, "initial_delay_seconds": 0})["id"]
    worker_id = register_worker(traced)
    run_id = traced.start_run(job_id)["id"]
    (first,) = claim(traced, worker_id)["assignments"]
    ran(first, worker_id, "failed")
    report(traced, worker_id, completions=[completion(first, "failed", 1)])
    Reaper(traced.store, traced.store.clock, heartbeat_timeout_seconds=3600).step()  # queued
    (second,) = claim(traced, worker_id)["assignments"]
    ran(second, worker_id)
    reported(traced, worker_id, second)

    spans = spans_of(receiver, run_id, *LIFE)
    assert len(spans["run"]) == 1
    for name in ("attempt", "placement"):
        numbers = [span.attributes["herder.attempt.number"] for span in spans[name]]
        assert sorted(numbers, key=str) == [1, 2], name
    outcomes = {s.parent_span_id: s.attributes["herder.attempt.outcome"] for s in spans["report"]}
    assert outcomes == {
        f"{trace_ids.span_id(trace_ids.ATTEMPT, first['attempt_id']):016x}": "failed",
        f"{trace_ids.span_id(trace_ids.ATTEMPT, second['attempt_id']):016x}": "succeeded",
    }


def test_a_workflow_s_runs_share_its_trace_under_its_span(traced: Api, receiver: Receiver) -> None:
    job(traced, "work")
    worker_id = register_worker(traced)
    flow_run_id = start(traced, workflow(traced, tasks=chain("a", "b"))["id"])["id"]
    run_ids = []
    for _ in ("a", "b"):
        (assignment,) = claim(traced, worker_id)["assignments"]
        ran(assignment, worker_id)
        reported(traced, worker_id, assignment)
        run_ids.append(assignment["run_id"])

    tracing.flush()
    flow_span = f"{trace_ids.span_id(trace_ids.WORKFLOW_RUN, flow_run_id):016x}"
    trace = f"{trace_ids.trace_id(flow_run_id):032x}"
    for run_id in run_ids:
        spans = receiver.wait_for(*LIFE, run_id=run_id)
        assert one(spans, "run").parent_span_id == flow_span
        assert {span.trace_id for found in spans.values() for span in found} == {trace}
    assert receiver.wait_for_named("workflow run")
    (flow,) = receiver.named("workflow run")
    assert (flow.trace_id, flow.span_id, flow.parent_span_id) == (trace, flow_span, "")
    assert flow.attributes["herder.workflow_run.state"] == "succeeded"


def test_a_placement_says_why_its_run_waited(traced: Api, receiver: Receiver) -> None:
    job_id = traced.create_job("big", resources={"cpu": 4, "memory_mb": 512})["id"]
    small = register_worker(traced, "small", cpu=1)
    run_id = traced.start_run(job_id)["id"]
    passes = iter(range(1, 1_000))
    dispatcher = Dispatcher(traced.store.placement, monotonic=lambda: next(passes) * 100.0)
    dispatcher.step()  # it waits: no worker has room
    assert claim_nothing(traced, small)
    big = register_worker(traced, "big", cpu=8, memory_mb=8192)
    dispatcher.step()

    spans = spans_of(receiver, run_id, "placement")
    placement = one(spans, "placement")
    assert placement.attributes["herder.worker.id"] == big
    assert placement.attributes["herder.waiting_reason"]
    assert placement.attributes["herder.placer"] == "dispatcher"


def claim_nothing(api: Api, worker_id: str) -> bool:
    response = api.http.post(
        f"/v1/workers/{worker_id}/claim",
        headers=as_worker(worker_id),
        json={"max_runs": 1, "wait_seconds": 0},
    )
    assert response.status_code == 200, response.text
    assignments: list[Any] = response.json()["assignments"]
    return not assignments


def test_a_request_is_a_span_named_by_its_route_and_linked_to_the_run_it_submits(
    traced: Api, receiver: Receiver
) -> None:
    job_id = traced.create_job("hello")["id"]
    run_id = traced.start_run(job_id)["id"]

    submit = one(spans_of(receiver, run_id, "submit"), "submit")
    assert receiver.wait_for_named("POST /v1/jobs/{job_id}/runs")
    (request,) = receiver.named("POST /v1/jobs/{job_id}/runs")
    assert request.attributes["http.route"] == "/v1/jobs/{job_id}/runs"
    assert request.attributes["http.response.status_code"] == 201
    assert request.attributes["herder.tenant.id"] == traced.tenant_id
    assert (request.trace_id, request.span_id) in submit.links
    assert (submit.trace_id, submit.span_id) in request.links
    every_value = [str(v) for span in receiver.spans for v in span.attributes.values()]
    assert not any(traced.admin_key in value for value in every_value)  # never a key


def test_a_log_line_written_in_a_span_ends_with_its_trace_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)  # as a process's logging is set up before tracing
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    run_id = "run_01JTRACEDLOGLINE0000000000"
    log = logging.getLogger("herder.test")
    try:
        assert tracing.configure("worker")
        with tracing.within(Hung(run_id, None), (trace_ids.RUN, run_id)):
            log.warning("inside")
        log.warning("outside")
    finally:
        tracing.shutdown()
        logging.getLogger().removeHandler(handler)
    trace_id = f"{trace_ids.trace_id(run_id):032x}"
    assert written.getvalue().splitlines() == [
        f"WARNING inside trace_id={trace_id}",
        "WARNING outside",
    ]


def test_with_tracing_off_nothing_is_sent(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    with otlp_receiver() as (receiver, _):
        assert not tracing.configure("api")
        for api in _api(store, tmp_path):
            job_id = api.create_job("hello")["id"]
            worker_id = register_worker(api)
            api.start_run(job_id)
            (assignment,) = claim(api, worker_id)["assignments"]
            ran(assignment, worker_id)
            reported(api, worker_id, assignment)
        tracing.flush()
        assert receiver.requests == 0
        assert not tracing.enabled()


def test_a_workflow_run_cancelled_ends_its_queued_task_under_its_span(
    traced: Api, receiver: Receiver
) -> None:
    job(traced, "work")
    flow_run_id = start(traced, workflow(traced, tasks=chain("a", "b"))["id"])["id"]
    response = traced.http.post(f"/v1/workflow-runs/{flow_run_id}/cancel", headers=traced.admin)
    assert response.status_code == 200, response.text

    run = one(spans_of(receiver, run_of(traced, flow_run_id, "a"), "run"), "run")
    assert run.attributes["herder.run.state"] == "cancelled"
    assert run.parent_span_id == f"{trace_ids.span_id(trace_ids.WORKFLOW_RUN, flow_run_id):016x}"
    assert receiver.wait_for_named("workflow run")
