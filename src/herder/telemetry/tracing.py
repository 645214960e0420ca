"""OpenTelemetry tracing, off unless configured: one switch per process, the one way to
record a span, and trace ids in the log lines written while a span is current.

On when the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
is set (and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``): spans go
by OTLP over HTTP/protobuf through the SDK's batch processor, which sends from a thread of
its own, so recording one costs the caller no round trip. Off, nothing of the SDK is
imported (it and protobuf take longer to import than a worker takes to start a job) and
every recording function returns at its first line.

Spans are recorded when what they stand for has happened, with its start and end given (a
run's placement: from when it was queued to when it was placed), never held open across
processes: each process hangs its spans on ids derived from the run's ids
(``trace_ids``). So a span's id is chosen by the caller, and the SDK's id generator is
told it through a context variable for the one span it starts.

Configured once a process, after any fork (the batch processor's thread does not survive
one): ``configure`` at each entry point — the API server (each pre-forked child), the
scheduler, the worker.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

AttributeValue = str | int | float | bool
Attributes = Mapping[str, AttributeValue | None]  # None: left out

DEFAULT_SERVICE_NAME = "herder"


@dataclass(frozen=True)
class Hung:
    """Where a span hangs: the trace (by its root's id, ``trace_ids.trace_root``) and the
    span it is a child of (``(kind, id)``; None: it is the trace's root)."""

    root: str
    parent: tuple[str, str] | None


@dataclass
class _Tracing:
    provider: TracerProvider
    tracer: Tracer


@dataclass
class _Process:
    """This process's tracing: None while off."""

    tracing: _Tracing | None = None
    logs_correlated: bool = False  # the log record factory installed (once a process)


_process = _Process()


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this environment asks for traces (the OpenTelemetry variables)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def enabled() -> bool:
    return _process.tracing is not None


def tracer() -> Tracer | None:
    """This process's tracer while tracing is on (the API's request spans start theirs)."""
    return None if _process.tracing is None else _process.tracing.tracer


def configure(role: str) -> bool:
    """Start exporting this process's spans if the environment asks (``wanted``); ``role``
    (api, scheduler, worker) names the process in its resource. Whether tracing is on."""
    if _process.tracing is not None or not wanted():
        return _process.tracing is not None
    from herder.telemetry import otlp  # the SDK: imported only when on

    provider = otlp.provider(os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME, role)
    _process.tracing = _Tracing(provider, provider.get_tracer("herder"))
    _correlate_logs()
    return True


def flush() -> None:
    """Send what the batch processor holds now (tests; a process about to stop)."""
    if _process.tracing is not None:
        _process.tracing.provider.force_flush()


def shutdown() -> None:
    """Send what is held and stop exporting; tracing is off again."""
    if _process.tracing is None:
        return
    _process.tracing.provider.shutdown()
    _process.tracing = None


def record(
    name: str,
    hung: Hung,
    start: datetime,
    end: datetime,
    attributes: Attributes,
    *,
    span: tuple[str, str] | None = None,
    link_current: bool = False,
) -> None:
    """A span that ran from ``start`` to ``end``, hung as ``hung`` says; ``span``: its own
    id's ``(kind, id)`` when others hang from it (else a random id); ``link_current``: linked
    to the span current here (the request that made it)."""
    if (tracing := _process.tracing) is None:
        return
    from herder.telemetry import otlp

    otlp.record(
        tracing.provider, tracing.tracer, name, hung, _nanoseconds(start), _nanoseconds(end),
        {key: value for key, value in attributes.items() if value is not None},
        span=span, link_current=link_current,
    )  # fmt: skip


@contextmanager
def within(hung: Hung, span: tuple[str, str]) -> Iterator[None]:
    """Make the span ``span`` of ``hung``'s trace current for the block, without recording
    it (it is recorded at its end, by whoever ends it): the block's log lines carry its
    trace id, and spans it links to the current one find it."""
    if (tracing := _process.tracing) is None:
        yield
        return
    from herder.telemetry import otlp

    with otlp.current(hung.root, span, tracing.provider):
        yield


def trace_context() -> list[tuple[bytes, bytes]]:
    """The span current here as W3C trace context headers (``traceparent``, and
    ``tracestate`` if it has one), for a request sent on whose server is to be its child
    (the edge's, to a cell); none while tracing is off."""
    if _process.tracing is None:
        return []
    from herder.telemetry import otlp

    return otlp.trace_context()


def current_trace_id() -> str | None:
    """The trace id (32 hex digits) of the span current here, if any and tracing is on."""
    if _process.tracing is None:
        return None
    from herder.telemetry import otlp

    return otlp.current_trace_id()


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000) * 1_000


def _correlate_logs() -> None:
    """Every log record gets ``trace_id`` (empty outside a span), for any format to name as
    ``%(trace_id)s``; the handlers already set up append it to each line written in a span."""
    # the root's handlers, or the last resort of a process that set none (the API server's)
    handlers = [*logging.getLogger().handlers, *filter(None, [logging.lastResort])]
    for handler in handlers:
        if not isinstance(handler.formatter, _WithTraceId):
            handler.setFormatter(_WithTraceId(handler.formatter or logging.Formatter()))
    if _process.logs_correlated:  # once a process: configured again (tests), it stays
        return
    _process.logs_correlated = True
    making = logging.getLogRecordFactory()

    def with_trace_id(*args: object, **kwargs: object) -> logging.LogRecord:
        made = making(*args, **kwargs)
        made.trace_id = current_trace_id() or ""
        return made

    logging.setLogRecordFactory(with_trace_id)


class _WithTraceId(logging.Formatter):
    """A handler's own format, with ``trace_id=…`` after a line written in a span."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        line = self._inner.format(record)
        trace_id = getattr(record, "trace_id", "")
        return f"{line} trace_id={trace_id}" if trace_id else line
