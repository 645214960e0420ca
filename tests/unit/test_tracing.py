"""Tracing's switch and its ids (docs/traces.md): off unless the OpenTelemetry variables
name a collector, and then nothing of the SDK loaded; a run's trace and span ids derived
from its ids alone, alike in every process."""

from __future__ import annotations

import pytest

from herder.telemetry import trace_ids, tracing
from tests.unit.test_startup_imports import among, loaded_after

ENDPOINT = "http://collector:4318"


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
    ],
)
def test_tracing_is_on_only_where_a_collector_is_named(
    environ: dict[str, str], wanted: bool
) -> None:
    assert tracing.wanted(environ) is wanted


def test_off_no_process_loads_the_sdk() -> None:
    code = "\n".join(
        [
            "import os",
            "for name in list(os.environ):",
            "    if name.startswith('OTEL_'): del os.environ[name]",
            "import herder.server, herder.worker.agent, herder.control.scheduler",
            "from herder.telemetry import tracing",
            "assert not tracing.configure('api')",
        ]
    )
    loaded = loaded_after(code)
    assert (
        among(loaded, ("opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf")) == set()
    )


def test_a_run_s_ids_are_the_same_wherever_they_are_derived() -> None:
    run_id, flow_run_id = "run_01JAAAAAAAAAAAAAAAAAAAAAAA", "wfr_01JAAAAAAAAAAAAAAAAAAAAAAA"
    assert trace_ids.trace_id(run_id) == trace_ids.trace_id(run_id)
    assert trace_ids.span_id(trace_ids.RUN, run_id) == trace_ids.span_id(trace_ids.RUN, run_id)
    assert trace_ids.trace_id(run_id) != trace_ids.trace_id(flow_run_id)
    assert 0 < trace_ids.trace_id(run_id) < 2**128
    assert 0 < trace_ids.span_id(trace_ids.ATTEMPT, run_id) < 2**64
    # one id, three kinds of span: three span ids
    kinds = (trace_ids.RUN, trace_ids.ATTEMPT, trace_ids.WORKFLOW_RUN)
    assert len({trace_ids.span_id(kind, run_id) for kind in kinds}) == 3


def test_a_workflow_s_task_is_in_its_workflow_run_s_trace_under_its_span() -> None:
    run_id, flow_run_id = "run_01JBBBBBBBBBBBBBBBBBBBBBBB", "wfr_01JBBBBBBBBBBBBBBBBBBBBBBB"
    assert trace_ids.trace_root(run_id, flow_run_id) == flow_run_id
    assert trace_ids.trace_root(run_id, None) == run_id
    assert trace_ids.run_parent(flow_run_id) == (trace_ids.WORKFLOW_RUN, flow_run_id)
    assert trace_ids.run_parent(None) is None
