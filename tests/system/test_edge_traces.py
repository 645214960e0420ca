"""The edge's requests as spans from real processes (docs/traces.md, "The edge's
requests"): a `herder edge` in front of a `herder up`, each exporting on its own to a real
OTLP/HTTP receiver in the test; a request sent through the edge with the caller's own
``traceparent`` is one trace — the caller's span, the edge's naming the cell, and the
cell's request span, its child by the context the edge sent on."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.otlp_receiver import otlp_receiver
from tests.system.conftest import Cluster, free_port, wait_healthy
from tests.waiting import eventually

pytestmark = pytest.mark.system

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


def test_a_request_through_a_real_edge_is_one_trace_with_the_cell_s_span(
    start_cluster: Callable[..., Cluster], tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("directory") / "directory.db"
    with otlp_receiver() as (receiver, endpoint):
        cluster = start_cluster(
            embedded=True,
            environment={
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms
            },
        )
        port = free_port()
        edge = cluster.spawn(
            "edge", "--directory-url", f"sqlite:///{directory}", "--port", str(port),
            "--default-cell-url", cluster.url, "--default-cell", "a", "--region", "eu",
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, edge)
        headers = {
            "Authorization": f"Bearer {cluster.credentials['api_key']}",
            "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
        }
        with httpx.Client(base_url=url, timeout=30) as http:
            adopted = http.post(
                "/v1/cells/a/adopt", headers={"Authorization": headers["Authorization"]}
            )
            assert adopted.status_code == 200, adopted.text  # its system tenant placed
            answer = http.get("/v1/jobs", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.headers["Herder-Cell"] == "a"

        def in_the_trace() -> list[str]:
            spans = receiver.named("GET /v1/jobs")
            return [str(s.resource["herder.process"]) for s in spans if s.trace_id == CALLER_TRACE]

        arrived = eventually(lambda: sorted(in_the_trace()) == ["api", "edge"], 30)
        cluster.stop_all()  # while the receiver still answers what they send as they stop
    assert arrived, receiver.spans
    spans = {s.resource["herder.process"]: s for s in receiver.named("GET /v1/jobs")}
    at_edge, at_cell = spans["edge"], spans["api"]
    assert at_edge.parent_span_id == CALLER_SPAN
    assert at_cell.parent_span_id == at_edge.span_id
    assert at_edge.attributes["herder.cell"] == "a"
    assert at_edge.attributes["herder.region"] == "eu"
    assert at_edge.attributes["http.response.status_code"] == 200
    # the cell's span begins within the edge's; it may end a little after the edge's: the
    # cell's span closes once its response is sent, which the edge may have read whole first
    assert at_edge.start_ns <= at_cell.start_ns <= at_edge.end_ns
