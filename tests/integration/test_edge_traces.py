"""The edge's requests as spans (docs/traces.md, "The edge's requests"), read by a real
OTLP/HTTP receiver: a request through the edge to a cell (served over real HTTP, on each
store) is one trace — the caller's span, the edge's span naming the cell and its region, and
the cell's request span its child by the ``traceparent`` the edge sends; named as the cell
names it, never by the path asked. Hostile input — a forged trace context, an unknown
method, paths full of ids and junk, a key — makes a span of a bounded name with nothing of
it in its attributes, and never a 500."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.directory.repository import Directory
from herder.domain.models import Role
from herder.edge.app import create_edge_app
from herder.edge.settings import EdgeSettings
from herder.edge.span_names import FORWARDED, SpanNames
from herder.settings import Settings, sqlite_url
from herder.store.store import Store
from herder.telemetry import tracing
from herder.telemetry.latency import UNMATCHED
from tests.integration.served import served
from tests.otlp_receiver import ReceivedSpan, Receiver, otlp_receiver
from tests.waiting import eventually

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
SERVER_KIND = 2  # OTLP's SPAN_KIND_SERVER


@dataclass
class Traced:
    edge: TestClient
    receiver: Receiver
    key: str  # a tenant's admin key, ten_….key_….secret
    tenant_id: str
    system_admin: str  # the cell's


@pytest.fixture
def traced(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Traced]:
    """A cell (the test's store, served over HTTP) behind an edge, both made with tracing on,
    exporting to a receiver of the test's own."""
    with otlp_receiver() as (receiver, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms: the batch sent soon
        assert tracing.configure("edge")
        directory = Directory(sqlite_url(tmp_path / "directory.db"))
        try:
            made = store.access.bootstrap()
            assert made is not None
            tenant = store.access.create_tenant("traced")
            key = store.access.create_api_key(tenant.id, Role.ADMIN, "k")[1]
            cell_app = create_app(store, Settings(home=tmp_path, database_url=store.database.url))
            with served(cell_app) as cell:
                directory.create_cell("a", "eu", cell.url, datetime.now(UTC))
                directory.place([tenant.id], "a", datetime.now(UTC))
                settings = EdgeSettings(directory_url="unused", timeout_seconds=10)
                with TestClient(create_edge_app(settings, directory)) as edge:
                    yield Traced(edge, receiver, key, tenant.id, made.admin_key)
        finally:
            tracing.shutdown()
            directory.close()


def spans_named(receiver: Receiver, name: str, count: int = 1) -> list[ReceivedSpan]:
    tracing.flush()
    arrived = eventually(lambda: len(receiver.named(name)) >= count, 15)
    assert arrived, [span.name for span in receiver.spans]
    return receiver.named(name)


def edge_and_cell(spans: list[ReceivedSpan]) -> tuple[ReceivedSpan, ReceivedSpan]:
    (edge,) = [span for span in spans if "herder.cell" in span.attributes]
    (cell,) = [span for span in spans if "herder.cell" not in span.attributes]
    return edge, cell


def test_a_request_through_the_edge_is_one_trace_with_the_cell_s_span_its_child(
    traced: Traced,
) -> None:
    auth = {"Authorization": f"Bearer {traced.key}"}
    job = {"name": "traced", "runtime": "shell", "command": "true"}
    made = traced.edge.post("/v1/jobs", headers=auth, json=job)
    assert made.status_code == 201, made.text
    caller = {**auth, "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    read = traced.edge.get(f"/v1/jobs/{made.json()['id']}", headers=caller)
    assert read.status_code == 200, read.text

    edge, cell = edge_and_cell(spans_named(traced.receiver, "GET /v1/jobs/{job_id}", 2))
    assert edge.trace_id == cell.trace_id == CALLER_TRACE  # the caller's trace
    assert edge.parent_span_id == CALLER_SPAN
    assert cell.parent_span_id == edge.span_id
    assert edge.kind == SERVER_KIND
    assert edge.attributes == {
        "http.request.method": "GET",
        "http.route": "/v1/jobs/{job_id}",
        "http.response.status_code": 200,
        "herder.cell": "a",
        "herder.region": "eu",
    }
    assert cell.attributes["herder.tenant.id"] == traced.tenant_id  # as the cell admitted it
    assert edge.resource["herder.process"] == "edge"
    assert edge.start_ns <= cell.start_ns <= edge.end_ns  # the cell may close its span after
    # with no caller's trace: the edge's span is the root, the cell's still its child
    edge, cell = edge_and_cell(spans_named(traced.receiver, "POST /v1/jobs", 2))
    assert edge.parent_span_id == ""
    assert (cell.trace_id, cell.parent_span_id) == (edge.trace_id, edge.span_id)


def test_an_edge_refusal_and_a_path_no_route_names_are_spans_of_bounded_names(
    traced: Traced,
) -> None:
    auth = {"Authorization": f"Bearer {traced.key}"}
    unknown = traced.edge.get("/v1/no-such-thing/run_01JZZZZZZZZZZZZZZZZZZZZZZZ", headers=auth)
    assert unknown.status_code == 404
    (span,) = spans_named(traced.receiver, f"GET {FORWARDED}")
    assert span.attributes["herder.cell"] == "a"
    assert "http.route" not in span.attributes
    lost = "Bearer ten_01M8H1Z0C3R7Q2W5E9T4Y6V8XP.key_01M8H1Z0C3R7Q2W5E9T4Y6V8XP.secret"
    refused = traced.edge.get("/v1/jobs", headers={"Authorization": lost})
    assert refused.status_code == 404  # a tenant no cell has: answered by the edge
    (span,) = spans_named(traced.receiver, "GET /v1/jobs")
    assert span.attributes["http.response.status_code"] == 404
    assert "herder.cell" not in span.attributes


def test_the_edge_s_own_calls_of_a_cell_are_children_of_its_request_s_span(
    traced: Traced,
) -> None:
    """Its administration (here: a cell's tenants adopted) asks the cell in turn, each call
    a child of the one request's span: a tenant's move is one trace so."""
    adopted = traced.edge.post(
        "/v1/cells/a/adopt", headers={"Authorization": f"Bearer {traced.system_admin}"}
    )
    assert adopted.status_code == 200, adopted.text
    (edge,) = spans_named(traced.receiver, "POST /v1/cells/{cell}/{action}")
    for listed in spans_named(traced.receiver, "GET /v1/tenants"):  # the cell's, page by page
        assert (listed.trace_id, listed.parent_span_id) == (edge.trace_id, edge.span_id)


HOSTILE_TRACE_CONTEXTS = [
    {"traceparent": "00-" + "f" * 32 + "-" + "e" * 16 + "-01" + "x" * 4000},
    {"traceparent": "ff-00000000000000000000000000000000-0000000000000000-01"},
    {"traceparent": "00-AAAA\u00e9-01", "tracestate": "k=" + "v" * 6000},
    {
        "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
        "tracestate": ",".join(f"k{n}=v{n}" for n in range(500)),
        "baggage": "secret=" + "s" * 100,
    },
]


@pytest.mark.parametrize("context", HOSTILE_TRACE_CONTEXTS)
def test_hostile_trace_context_makes_no_span_of_its_own_and_reaches_no_cell(
    traced: Traced, context: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    headers = {"Authorization": f"Bearer {traced.key}".encode(), **{
        name: value.encode("latin-1") for name, value in context.items()
    }}  # fmt: skip
    answer = traced.edge.get("/v1/jobs", headers=headers)
    assert answer.status_code == 200, answer.text
    edge, cell = edge_and_cell(spans_named(traced.receiver, "GET /v1/jobs", 2))
    assert cell.parent_span_id == edge.span_id  # the edge's context, not the caller's
    sent = {str(value) for span in (edge, cell) for value in span.attributes.values()}
    for value in context.values():
        assert not any(value in attribute for attribute in sent)
    assert all(len(attribute) <= 128 for attribute in sent)
    assert traced.key not in str(traced.receiver.spans)
    assert [r for r in caplog.records if r.name.startswith("opentelemetry")] == []  # no log


def test_hostile_paths_methods_and_keys_make_only_bounded_names_and_no_500(
    traced: Traced,
) -> None:
    secret = traced.key
    asked = [
        ("GET", "/v1/runs/" + "A" * 2000),
        ("GET", "/v1/" + "/".join(f"seg{n}" for n in range(200))),
        ("GET", "/v1/runs/run_01JZZZZZZZZZZZZZZZZZZZZZZZ/logs?follow=" + "x" * 1000),
        ("DELETE", f"/v1/jobs/{secret}"),
        ("POST", "/v1/hooks/ten_01M8H1Z0C3R7Q2W5E9T4Y6V8XP.hook_" + "z" * 300),
        ("BREW", "/v1/jobs"),
        ("GET", "/%2e%2e/%2e%2e/etc/passwd"),
        ("GET", "/ui/" + "q" * 500),
    ]
    for method, path in asked:
        answer = traced.edge.request(method, path, headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code < 500, (method, path, answer.text)
    tracing.flush()
    assert eventually(lambda: len(traced.receiver.spans) >= len(asked), 15)
    routes = SpanNames.of_the_api().routes
    methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    for span in traced.receiver.spans:
        method, _, route = span.name.partition(" ")
        assert method in methods, span.name
        assert route in routes | {UNMATCHED}, span.name  # the cell's own: unmatched
        assert len(span.attributes) <= 6
        for value in span.attributes.values():
            assert len(str(value)) <= 128, span
            assert secret not in str(value)


def test_with_tracing_off_the_edge_adds_no_middleware(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert not tracing.configure("edge")
    directory = Directory(sqlite_url(tmp_path / "directory.db"))
    try:
        app = create_edge_app(EdgeSettings(directory_url="unused"), directory)
        assert app.user_middleware == []
    finally:
        directory.close()
