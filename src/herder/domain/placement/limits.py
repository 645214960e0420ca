"""Limits by key in placement (docs/flow-control.md): a run counted against a key of one of
its tenant's limits waits while that key has ``max_running`` runs running, or has started
``rate.count`` runs within the last ``rate.period_seconds``; the keys of a limit take turns.

A run carries its keys (``QueuedRun.limit_keys``: limit id and rendered key, fixed at
submit); the snapshot carries each limit it names (``LimitView``) and, for each
rate-limited key of a queued run, its starts within the period (``KeyStarts``). Running
runs are counted from the fleet (a gang once). Within a pass each placement counts at once,
so a key never takes more than its room however many of its runs are queued.

**Turns.** A run's turn is how many runs of its busiest key are running or ahead of it in
the queue, then its keys' last start (``Snapshot.limit_last_starts``, kept by the store as
each run starts): the dispatcher takes runs by turn within a tenant's queue (``ordering``),
so a key with a thousand queued runs gets one start for every other key's one, never the
whole room because its runs are older. The last start decides when room comes one run at a
time (one slot): nothing runs then, so every key's next run is first in its key, and the
key served longest ago goes — acme, globex, acme, globex, not acme's backlog first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from herder.domain.placement.snapshot import KeyStarts, LimitView, QueuedRun, WorkerView

LimitKey = tuple[str, str]  # limit id, key

NEVER = datetime.min.replace(tzinfo=UTC)  # the last start of a key not started (lately)


@dataclass(frozen=True, order=True, slots=True)
class Turn:
    """When a limited run comes up among its tenant's runs, lowest first."""

    taken: int  # its busiest key's runs running or queued ahead of it
    last_start: datetime = NEVER  # the latest of its keys' last starts


FIRST_TURN = Turn(0)  # a run without keys


class Keyed(Protocol):
    """What a key counts of a run: its keys (a queued run's, or one being applied)."""

    @property
    def limit_keys(self) -> tuple[LimitKey, ...]: ...


@dataclass
class LimitsInPass:
    """What each key of the pass's limits has running and has started, kept up to date as
    the pass places runs."""

    limits: Mapping[str, LimitView]
    now: datetime
    running: Counter[LimitKey] = field(default_factory=Counter)
    starts: dict[LimitKey, KeyStarts] = field(default_factory=dict)
    started_now: Counter[LimitKey] = field(default_factory=Counter)  # in this pass
    answers: dict[LimitKey, str | None] = field(default_factory=dict)  # ``holding``'s, kept

    @classmethod
    def of(
        cls,
        limits: Mapping[str, LimitView],
        workers: Sequence[WorkerView],
        starts: Mapping[LimitKey, KeyStarts],
        now: datetime,
    ) -> LimitsInPass:
        running: Counter[LimitKey] = Counter()
        if limits:
            seen: set[str] = set()
            for worker in workers:
                for attempt in worker.running:
                    if attempt.limit_keys and attempt.run_id not in seen:
                        seen.add(attempt.run_id)
                        running.update(attempt.limit_keys)
        return cls(limits, now, running, dict(starts))

    def holding(self, run: Keyed) -> str | None:
        """Why one of the run's keys holds it back now (None: every key has room). Each
        key's answer is kept until a placement counts against it: a full key's backlog is
        thousands of runs asking the same."""
        for name in run.limit_keys:
            if name not in self.answers:
                limit = self.limits.get(name[0])
                # a limit deleted since the run was submitted binds it no more
                self.answers[name] = None if limit is None else self._held(limit, name[1])
            held = self.answers[name]
            if held is not None:
                return held
        return None

    def _held(self, limit: LimitView, key: str) -> str | None:
        name = (limit.id, key)
        running = self.running[name]
        full = limit.max_running is not None and running >= limit.max_running
        rate = self._rate(limit, key)
        spent = rate is not None and rate[0] >= (limit.rate_count or 0)
        if not full and not spent:
            return None
        parts = []
        if limit.max_running is not None:
            parts.append(f"{running} of {limit.max_running} running")
        if rate is not None:
            used, frees_at = rate
            per = f"{used}/{_period(limit.rate_period_seconds)} used"
            parts.append(f"{per}, next start at {frees_at:%H:%M:%S} UTC" if spent else per)
        return f"limit {limit.name}, key {key}: {'; '.join(parts)}"

    def _rate(self, limit: LimitView, key: str) -> tuple[int, datetime] | None:
        """Starts within the period (read and in this pass) and when the window next frees
        one; None for a limit without a rate."""
        if limit.rate_count is None:
            return None
        period = timedelta(seconds=limit.rate_period_seconds)
        read = self.starts.get((limit.id, key))
        if read is None or read.oldest <= self.now - period:
            read = KeyStarts(0, self.now)
        return read.count + self.started_now[(limit.id, key)], read.oldest + period

    def take(self, run: Keyed) -> None:
        """The run is placed: it counts against each of its keys from now on."""
        for name in run.limit_keys:
            if name[0] in self.limits:
                self.running[name] += 1
                self.started_now[name] += 1
                self.answers.pop(name, None)

    def rate_limited(self, run: Keyed) -> list[LimitKey]:
        """The run's keys whose limits have a rate: each start there is recorded."""
        return [
            name
            for name in run.limit_keys
            if name[0] in self.limits and self.limits[name[0]].rate_count is not None
        ]


def turns(
    runs: Iterable[QueuedRun],
    limits: Mapping[str, LimitView],
    running: Mapping[LimitKey, int],
    last_starts: Mapping[LimitKey, datetime],
) -> dict[str, Turn]:
    """Each limited run's turn: for the busiest of its keys (of limits that still exist), the
    key's running runs plus its runs ahead of it in the queue (by class, then age); then the
    latest of its keys' last starts. Runs without keys have none."""
    by_key: dict[LimitKey, list[QueuedRun]] = defaultdict(list)
    for run in runs:
        for name in run.limit_keys:
            if name[0] in limits:
                by_key[name].append(run)
    taken: dict[str, int] = {}
    latest: dict[str, datetime] = {}
    for name, queued in by_key.items():
        queued.sort(key=lambda run: (-run.priority, run.queued_at, run.id))
        last = last_starts.get(name, NEVER)
        for ahead, run in enumerate(queued):
            taken[run.id] = max(taken.get(run.id, 0), running.get(name, 0) + ahead)
            latest[run.id] = max(latest.get(run.id, NEVER), last)
    return {run_id: Turn(count, latest[run_id]) for run_id, count in taken.items()}


def _period(seconds: int) -> str:
    named = {60: "min", 3600: "h", 86_400: "day", 604_800: "week"}
    return named.get(seconds, f"{seconds} s")
