"""The metrics counted as things happen, and one function per kind of event to count them.

Each is called once per batch, after the transaction that did it committed (so a rolled-back
batch counts nothing), with what the batch already had in hand: no query is ever made for a
metric. Label values come from small fixed sets; children are made once and kept.
"""

from __future__ import annotations

import functools
import time
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping, Set
from contextlib import contextmanager
from datetime import datetime

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from herder.domain.events import TriggerOutcome
from herder.domain.jobs import Priority
from herder.domain.lifecycle.changes import RunMove
from herder.domain.lifecycle.facts import RunFacts
from herder.domain.states import RunState

# No ``*_created`` series: a counter's creation time per label set doubles the samples
# scraped and no rule or panel reads it (and several API processes, which add up their
# counters, never had one). The switch is read at each scrape, so this one call holds for the
# scheduler's metrics server as for /metrics.
disable_created_metrics()  # type: ignore[no-untyped-call]

PRIORITY_NAMES = {priority.rank: str(priority) for priority in Priority}  # as stored → name

_WAITS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400, 43200)
_PICKUPS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_DURATIONS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400)
_LAGS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)
_REQUESTS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_PASSES = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

QUEUE_WAIT = Histogram(
    "herder_run_queue_wait_seconds", "From queued to placed on a worker, by priority class",
    ["priority"], buckets=_WAITS,
)  # fmt: skip
PICKUP = Histogram(
    "herder_run_pickup_seconds", "From placed to handed to its worker by a claim",
    buckets=_PICKUPS,
)  # fmt: skip
DURATION = Histogram(
    "herder_run_duration_seconds", "From placed to ended, of runs that ran, by outcome",
    ["outcome"], buckets=_DURATIONS,
)  # fmt: skip
ENDED = Counter("herder_runs_ended", "Runs that ended, by outcome (end state)", ["outcome"])
RETRIES = Counter("herder_run_retries", "Failed attempts given another try (to retry_wait)")
ZOMBIES = Counter(
    "herder_zombie_reports_refused",
    "Worker reports and heartbeats about an attempt that is no longer current, refused",
)
PREEMPTIONS = Counter(
    "herder_preemptions",
    "Running attempts the dispatcher chose to stop, by cause (priority, reclaim, budget)",
    ["cause"],
)
FIRES = Counter("herder_schedule_fires", "Runs started by schedules")
EVENTS = Counter("herder_events_received", "Events accepted, by source (api, hook)", ["source"])
TRIGGER_STARTS = Counter(
    "herder_trigger_starts",
    "What matching triggers did with events: started work, or refused (the event says why)",
    ["outcome"],
)
HOOK_REFUSALS = Counter(
    "herder_hook_deliveries_refused",
    "Inbound webhook requests refused, by HTTP status (401 signature, 413, 422, 429)",
    ["status"],
)
MISSED_FIRES = Counter("herder_schedule_missed_fires", "Schedule fires not run (misfire policy)")
DEADLINES_MISSED = Counter(
    "herder_deadlines_missed",
    "Runs and workflow runs found unfinished past their deadline, by kind (run, workflow_run)",
    ["kind"],
)
FIRE_LAG = Histogram(
    "herder_schedule_fire_lag_seconds", "From a fire's due time to its run being made",
    buckets=_LAGS,
)  # fmt: skip
REQUESTS = Histogram(
    "herder_api_request_duration_seconds",
    "API requests by route template, method and status class",
    ["route", "method", "status"], buckets=_REQUESTS,
)  # fmt: skip
DATABASE_STATEMENTS = Counter(
    "herder_database_statements",
    "What this process sent the database, by kind: statements (a round trip each), commits "
    "and rollbacks",
    ["kind"],
)
LOOP_PASS = Histogram(
    "herder_control_loop_pass_seconds", "How long a control loop's pass took", ["loop"],
    buckets=_PASSES,
)  # fmt: skip
LOOP_LAST_PASS = Gauge(
    "herder_control_loop_last_pass_timestamp_seconds",
    "When a control loop last finished a pass (Unix time)", ["loop"], multiprocess_mode="max",
)  # fmt: skip
WORKER_STREAMS = Gauge(
    "herder_worker_streams", "Workers' streams open to this process (WS /v1/workers/{id}/stream)",
    multiprocess_mode="livesum",
)  # fmt: skip
LOOP_HELD = Gauge(
    "herder_control_loop_held", "1 while this process holds a control loop's lease", ["loop"],
    multiprocess_mode="livesum",
)  # fmt: skip


@functools.cache
def _queue_wait(priority: int) -> Histogram:
    return QUEUE_WAIT.labels(PRIORITY_NAMES.get(priority, "other"))


@functools.cache
def _ended(outcome: str) -> Counter:
    return ENDED.labels(outcome)


@functools.cache
def _duration(outcome: str) -> Histogram:
    return DURATION.labels(outcome)


@functools.cache
def _loop(name: str) -> tuple[Histogram, Gauge]:
    return LOOP_PASS.labels(name), LOOP_LAST_PASS.labels(name)


def runs_placed(now: datetime, placed: Iterable[tuple[int, datetime | None]]) -> None:
    """Runs placed: each one's priority rank and when it was queued."""
    for priority, queued_at in placed:
        if queued_at is not None:
            _queue_wait(priority).observe((now - queued_at).total_seconds())


def attempts_delivered(now: datetime, placed_at: Iterable[datetime]) -> None:
    for at in placed_at:
        PICKUP.observe((now - at).total_seconds())


def runs_moved(
    now: datetime, moves: Iterable[RunMove], moved: Set[str], facts: Mapping[str, RunFacts]
) -> None:
    """Runs that ended (and how long those that ran took) and runs sent to retry."""
    ended: Tally[str] = Tally()
    retries = 0
    for move in moves:
        if move.run_id not in moved:
            continue
        if move.target is RunState.RETRY_WAIT:
            retries += 1
        elif move.target.is_terminal:
            ended[move.target] += 1
            known = facts.get(move.run_id)
            if move.source is RunState.RUNNING and known and known.started_at is not None:
                _duration(move.target).observe((now - known.started_at).total_seconds())
    for outcome, count in ended.items():
        _ended(outcome).inc(count)
    if retries:
        RETRIES.inc(retries)


def zombie_reports(count: int) -> None:
    if count:
        ZOMBIES.inc(count)


def preemptions(causes: Iterable[str]) -> None:
    for cause in causes:
        PREEMPTIONS.labels(cause).inc()


def event_received(source: str, outcomes: Iterable[TriggerOutcome]) -> None:
    EVENTS.labels(source).inc()
    for outcome in outcomes:
        TRIGGER_STARTS.labels("refused" if outcome.error else "started").inc()


def hook_refused(status: int) -> None:
    HOOK_REFUSALS.labels(str(status)).inc()


def schedules_fired(now: datetime, due_times: Iterable[datetime], missed: int) -> None:
    """Runs made by schedules, each due at one of ``due_times``; fires missed."""
    fired = 0
    for due in due_times:
        fired += 1
        FIRE_LAG.observe(max(0.0, (now - due).total_seconds()))
    if fired:
        FIRES.inc(fired)
    if missed:
        MISSED_FIRES.inc(missed)


def deadlines_missed(kind: str, count: int) -> None:
    """``count`` runs (``kind`` run) or workflow runs (workflow_run) missed their deadline."""
    if count:
        DEADLINES_MISSED.labels(kind).inc(count)


@contextmanager
def loop_pass(name: str) -> Iterator[None]:
    """Time a control loop's pass; one that raises is not a pass."""
    histogram, gauge = _loop(name)
    started = time.perf_counter()
    yield
    histogram.observe(time.perf_counter() - started)
    gauge.set(time.time())


def loop_held(name: str, *, held: bool) -> None:
    LOOP_HELD.labels(name).set(1 if held else 0)


@functools.cache
def _request(route: str, method: str, status: str) -> Histogram:
    return REQUESTS.labels(route, method, status)


def request_served(route: str, method: str, status: str, seconds: float) -> None:
    """``route`` is the route's template (``/v1/runs/{run_id}``), never the path asked for."""
    _request(route, method, status).observe(seconds)
