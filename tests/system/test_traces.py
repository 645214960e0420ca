"""Traces from real processes (docs/traces.md): ``herder up`` (the API and the loops) and its
worker, each exporting on its own to a real OTLP/HTTP receiver in the test, make one tree of
a run's life without telling each other anything about it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from herder.telemetry import trace_ids
from tests.otlp_receiver import otlp_receiver
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system


def test_a_run_s_spans_from_the_api_and_its_worker_form_one_trace(
    start_cluster: Callable[..., Cluster],
) -> None:
    with otlp_receiver() as (receiver, endpoint):
        cluster = start_cluster(
            embedded=True,
            environment={
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms
            },
        )
        with cluster.client() as herder:
            job = herder.create_job("traced", {"runtime": "shell", "command": "echo traced"})
            run = herder.wait(herder.start_run(job.id).id, timeout=60)
        assert run.state == "succeeded"
        spans = receiver.wait_for(
            "submit", "placement", "hand-over", "attempt", "report", "run", run_id=run.id
        )
        cluster.stop_all()  # while the receiver still answers what they send as they stop

    (run_span,) = spans["run"]
    (attempt,) = spans["attempt"]
    (report,) = spans["report"]
    assert run_span.trace_id == f"{trace_ids.trace_id(run.id):032x}"
    assert attempt.resource["herder.process"] == "worker"  # recorded by the worker itself
    assert run_span.resource["herder.process"] == "api"
    assert attempt.trace_id == run_span.trace_id
    assert attempt.parent_span_id == run_span.span_id
    assert report.parent_span_id == attempt.span_id
    assert attempt.attributes["herder.attempt.exit_code"] == 0
    assert run_span.start_ns <= attempt.start_ns <= attempt.end_ns <= run_span.end_ns


@pytest.mark.postgres
def test_the_api_server_scheduler_and_worker_each_record_their_part(
    system_postgres_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    with otlp_receiver() as (receiver, endpoint):
        cluster = start_cluster(
            system_postgres_url,
            scheduler=False,
            environment={
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms
            },
        )
        cluster.spawn("scheduler")
        cluster.start_worker("traced")
        with cluster.client() as herder:
            job = herder.create_job("traced", {"runtime": "shell", "command": "echo traced"})
            run = herder.wait(herder.start_run(job.id).id, timeout=60)
        assert run.state == "succeeded"
        spans = receiver.wait_for("submit", "placement", "attempt", "report", "run", run_id=run.id)
        cluster.stop_all()  # while the receiver still answers what they send as they stop

    recorded_by = {
        name: {span.resource["herder.process"] for span in spans[name]} for name in spans
    }
    assert recorded_by["submit"] == recorded_by["report"] == recorded_by["run"] == {"api"}
    assert recorded_by["placement"] == {"scheduler"}
    assert recorded_by["attempt"] == {"worker"}
    (run_span,) = spans["run"]
    (placement,) = spans["placement"]
    assert placement.parent_span_id == run_span.span_id
    assert placement.trace_id == run_span.trace_id
