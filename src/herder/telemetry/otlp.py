"""The OpenTelemetry SDK's side of ``tracing``: the provider (OTLP over HTTP/protobuf, the
batch processor), spans started with the ids ``trace_ids`` derives, and the current span.
Only ``tracing`` imports this, and only once tracing is on."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from herder.telemetry import trace_ids
from herder.telemetry.tracing import Hung

# The ids the next span started in this context takes: (trace id, span id), None for random.
_chosen: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "herder_chosen_ids", default=(None, None)
)


class _ChosenIds(IdGenerator):
    """The SDK's random ids, unless ``record`` chose them for the span it starts."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        chosen = _chosen.get()[1]
        return chosen if chosen is not None else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        chosen = _chosen.get()[0]
        return chosen if chosen is not None else self._random.generate_trace_id()


# A caller's malformed trace context is dropped, as W3C trace context says; the API's warning
# for each (quoting it) would let any client write lines into the log, one a request
QUIETED = ("opentelemetry.trace.span", "opentelemetry.trace.propagation.tracecontext")


def provider(service_name: str, role: str) -> TracerProvider:
    """Spans batched and sent to the collector the ``OTEL_EXPORTER_OTLP_*`` variables name;
    the sampler is the SDK's (``OTEL_TRACES_SAMPLER``)."""
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.ERROR)
    made = TracerProvider(
        resource=Resource.create({"service.name": service_name, "herder.process": role}),
        id_generator=_ChosenIds(),
    )
    made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return made


def record(
    provider: TracerProvider,
    tracer: Tracer,
    name: str,
    hung: Hung,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, AttributeValue],
    *,
    span: tuple[str, str] | None,
    link_current: bool,
) -> None:
    trace_id = trace_ids.trace_id(hung.root)
    parent = Context()  # a root, never a child of whatever is current here
    if hung.parent is not None:
        parent_span = _remote(provider, trace_id, trace_ids.span_id(*hung.parent), name)
        parent = trace.set_span_in_context(NonRecordingSpan(parent_span), parent)
    current = trace.get_current_span()
    links = [Link(current.get_span_context())] if link_current and _valid(current) else []
    chosen = _chosen.set((trace_id, None if span is None else trace_ids.span_id(*span)))
    try:
        started = tracer.start_span(
            name, context=parent, attributes=attributes, links=links, start_time=start_ns
        )
    finally:
        _chosen.reset(chosen)
    started.end(end_time=end_ns)
    if link_current and current.is_recording():
        current.add_link(started.get_span_context())


@contextmanager
def current(root: str, span: tuple[str, str], provider: TracerProvider) -> Iterator[None]:
    trace_id = trace_ids.trace_id(root)
    context = _remote(provider, trace_id, trace_ids.span_id(*span), "current")
    with trace.use_span(NonRecordingSpan(context), end_on_exit=False):
        yield


def trace_context() -> list[tuple[bytes, bytes]]:
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)  # W3C's alone: never a caller's baggage
    return [(name.encode(), value.encode("latin-1")) for name, value in carrier.items()]


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None


def _remote(provider: TracerProvider, trace_id: int, span_id: int, name: str) -> SpanContext:
    """A span recorded elsewhere (or later), as a parent: sampled as its trace's root is, so
    a ratio sampler keeps or drops a trace whole in every process."""
    # an empty context: the root's decision, not that of whatever span is current here
    decision = provider.sampler.should_sample(Context(), trace_id, name).decision
    sampled = decision is Decision.RECORD_AND_SAMPLE
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)


def _valid(span: trace.Span) -> bool:
    return span.get_span_context().is_valid
