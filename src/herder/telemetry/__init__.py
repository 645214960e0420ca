"""Prometheus metrics this process counts as things happen (``metrics``), how several API
processes add theirs up (``multiprocess``) and API latency by route (``latency``). What the
database can count is counted at each scrape instead (``herder.store.gauges``)."""
