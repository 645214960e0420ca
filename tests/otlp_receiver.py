"""A real OTLP/HTTP trace receiver in the test process: ``POST /v1/traces`` with an
``ExportTraceServiceRequest`` (protobuf), decoded by ``opentelemetry-proto`` as a collector
would, each span kept as the assertions read it. Started on a free loopback port, stopped
when the block ends."""

from __future__ import annotations

import contextlib
import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.waiting import eventually

AttributeValue = str | int | float | bool | None


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root
    start_ns: int
    end_ns: int
    kind: int
    attributes: dict[str, AttributeValue]
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    resource: dict[str, AttributeValue]


def _value(value: AnyValue) -> AttributeValue:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    found: AttributeValue = getattr(value, kind)
    return found


class Receiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                start_ns=span.start_time_unix_nano,
                                end_ns=span.end_time_unix_nano,
                                kind=span.kind,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                links=tuple(
                                    (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                                ),
                                resource=resource,
                            )
                        )

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [span for span in self.spans if span.name == name]

    def of_run(self, run_id: str) -> dict[str, list[ReceivedSpan]]:
        """The spans that name this run, by name."""
        found: dict[str, list[ReceivedSpan]] = {}
        with self._lock:
            for span in self.spans:
                if span.attributes.get("herder.run.id") == run_id:
                    found.setdefault(span.name, []).append(span)
        return found

    def wait_for(
        self, *names: str, run_id: str, within: float = 15.0
    ) -> dict[str, list[ReceivedSpan]]:
        """The run's spans once each of ``names`` has come (the assertion fails otherwise)."""
        arrived = eventually(lambda: set(names) <= set(self.of_run(run_id)), within)
        spans = self.of_run(run_id)
        assert arrived, f"spans of {run_id}: {sorted(spans)}, waited for {sorted(names)}"
        return spans

    def wait_for_named(self, name: str, within: float = 15.0) -> bool:
        """Whether a span of this name has come within ``within`` seconds."""
        return eventually(lambda: bool(self.named(name)), within)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            receiver.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the test reads what arrived, not the server's log."""

    return Handler


@contextlib.contextmanager
def otlp_receiver() -> Iterator[tuple[Receiver, str]]:
    """A receiver and its traces endpoint (``http://127.0.0.1:PORT/v1/traces``)."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
