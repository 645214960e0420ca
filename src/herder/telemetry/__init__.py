"""Prometheus metrics this process counts as things happen (``metrics``), how several API
processes add theirs up (``multiprocess``), API latency by route (``latency``) and the cell a
process is one of (``cell_info``). What the
database can count is counted at each scrape instead (``herder.store.gauges``).

OpenTelemetry traces, off unless configured (docs/traces.md): the switch and the one way to
record a span (``tracing``; the SDK's side, imported only when on, ``otlp``), a run's trace
and span ids derived from its ids (``trace_ids``), a run's life recorded as it happens
(``traces``) and the API's requests as spans (``request_spans``)."""
