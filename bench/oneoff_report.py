"""The one-off section of RESULTS.md: Herder beside Celery, and beside the spawn limits."""

from __future__ import annotations

import datetime
import itertools
import statistics

from bench.baseline import SpawnLimits
from bench.celery_peer import PeerResult
from bench.oneoff import OneOffResult
from herder.worker.isolation import Isolation

STORE_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}
HEADER = (
    "| runner | runs | seconds | runs/s | ratio to Celery (subprocess) | submit→start p50 | p99 "
    "| API + scheduler | worker | PostgreSQL / Redis | **control plane** | jobs | bench client "
    "| statements |"
)


def section(
    peers: list[PeerResult],
    herders: list[OneOffResult],
    limits: SpawnLimits,
    machine: str,
    when: datetime.datetime,
    command: str,
) -> list[str]:
    celery_rates = [peer.tasks_per_second for peer in peers if peer.variant == "subprocess"]
    celery = statistics.median(celery_rates) if celery_rates else None
    lines = [
        f"\n### One-off runs beside Celery, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`.\n",
        _limits_line(limits, herders),
        "",
        HEADER,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_peer_row(peer, celery) for peer in peers]
    lines += [_herder_row(herder, celery) for herder in herders]
    lines += ["", *_spreads(peers, herders, celery)]
    lines += [
        "",
        "Ratios are to the median of Celery's repetitions. "
        "Runs/s from the first submit to the last completion. Statements: what the server "
        "process sent the database a run over the throughput part (statements, commits and "
        "rollbacks: round trips; `herder_database_statements_total`), where batches share "
        "them. CPU columns: ms per run over the "
        "throughput part, user + system from /proc; **control plane** = API + scheduler + worker "
        "+ PostgreSQL / Redis (target for Herder on PostgreSQL: ≤ 1.0 ms); jobs and the bench "
        "client are not in it.",
        "",
        "- Celery 5 with Redis (database 15) as broker and result backend: one worker, "
        "`--pool prefork --concurrency 2`, Celery's defaults otherwise (prefetch multiplier 4, "
        "early acknowledgement, JSON). The bench submits with `delay()` from one thread and "
        "waits for every result; the clock stops when the last result is in hand. Worker: "
        "Celery's parent and pool processes; jobs: what the pool reaped (`subprocess.run` of "
        "`/bin/true`); Redis: the whole server.",
        "- Herder: `herder server --with-scheduler` and one `herder worker` as root, with the "
        "default sandbox or `--isolation none`; the bench submits in batches of 1,000 (`POST "
        "/v1/runs/batch`, as `herder run start --count` does); the clock "
        "runs from the first run's `created_at` to the last one's `finished_at`. Submit→start: "
        "one run at a time on an idle system. API + scheduler: the server process; worker: the "
        "agent's own CPU; jobs: what it reaped (sandbox set-up and `true`). PostgreSQL: every "
        "process of the cluster (live backends, and the postmaster with the ones that ended), "
        "so other databases' use of this shared server (tests) is counted too; the bench's own "
        "count of ended runs every 0.2 s is not (its backend's CPU is taken out).",
    ]
    return lines


def _limits_line(limits: SpawnLimits, herders: list[OneOffResult]) -> str:
    line = (
        f"Spawn limits, `/bin/true` from 2 threads: plain **{limits.plain:,.0f}/s**; in fresh "
        "namespaces (`unshare --net --pid --fork --mount-proc --ipc --uts`) "
    )
    if limits.unshare is None:
        return line + "not measured (needs root)."
    shares = [
        f"{STORE_NAMES[herder.store]} {herder.runs_per_second / limits.unshare:.0%}"
        for herder in herders
        if herder.isolation is Isolation.SANDBOX
    ]
    line += f"**{limits.unshare:,.0f}/s**."
    if shares:
        line += f" Herder with the sandbox, as a share of that: **{', '.join(shares)}** (≥ 70%)."
    return line


def _peer_row(peer: PeerResult, celery: float | None) -> str:
    worker, redis = peer.worker_cpu.own, peer.redis_cpu_seconds
    return (
        f"| Celery ({peer.variant}) | {peer.tasks} | {peer.seconds:.1f} "
        f"| **{peer.tasks_per_second:.0f}** | {_ratio(peer.tasks_per_second, celery)} | — | — "
        f"| — | {peer.per_task_ms(worker):.2f} | {peer.per_task_ms(redis):.2f} "
        f"| **{peer.per_task_ms(worker + redis):.2f}** "
        f"| {peer.per_task_ms(peer.worker_cpu.reaped):.2f} "
        f"| {peer.per_task_ms(peer.client_cpu_seconds):.2f} | — |"
    )


def _herder_row(herder: OneOffResult, celery: float | None) -> str:
    database = (
        "—"
        if herder.database_cpu_seconds is None
        else f"{herder.per_run_ms(herder.database_cpu_seconds):.2f}"
    )
    return (
        f"| Herder {STORE_NAMES[herder.store]}, {herder.isolation.value} | {herder.runs} "
        f"| {herder.seconds:.1f} | **{herder.runs_per_second:.0f}** "
        f"| {_ratio(herder.runs_per_second, celery)} "
        f"| {herder.start_p50_ms:.1f} ms | {herder.start_p99_ms:.1f} ms "
        f"| {herder.per_run_ms(herder.server_cpu.total):.2f} "
        f"| {herder.per_run_ms(herder.worker_cpu.own):.2f} | {database} "
        f"| **{herder.per_run_ms(herder.control_plane_seconds):.2f}** "
        f"| {herder.per_run_ms(herder.worker_cpu.reaped):.2f} "
        f"| {herder.per_run_ms(herder.client_cpu_seconds):.2f} "
        f"| {herder.statements_per_run:.1f} |"
    )


def _spreads(
    peers: list[PeerResult], herders: list[OneOffResult], celery: float | None
) -> list[str]:
    """Each system's figures as the range over its repetitions (when there are several)."""
    lines = []
    celery_rates = [peer.tasks_per_second for peer in peers if peer.variant == "subprocess"]
    if len(celery_rates) > 1:
        lines.append(f"- Celery (subprocess), {len(celery_rates)} repetitions: "
                     f"{_range(celery_rates, '.0f')} tasks/s")  # fmt: skip
    for (store, isolation), group in itertools.groupby(
        herders, key=lambda herder: (herder.store, herder.isolation)
    ):
        repeated = list(group)
        if len(repeated) < 2:
            continue
        rates = [herder.runs_per_second for herder in repeated]
        ratios = [rate / celery for rate in rates] if celery else []
        ratio = f" ({_range(ratios, '.2f')} of Celery)" if ratios else ""
        lines.append(
            f"- Herder {STORE_NAMES[store]}, {isolation.value}, {len(repeated)} repetitions: "
            f"**{_range(rates, '.0f')} runs/s**{ratio}; submit→start p50 "
            f"**{_range([h.start_p50_ms for h in repeated], '.1f')} ms**, p99 "
            f"**{_range([h.start_p99_ms for h in repeated], '.1f')} ms**; control plane "
            f"**{_range([h.per_run_ms(h.control_plane_seconds) for h in repeated], '.2f')} ms**"
            f"; statements a run: {_range([h.statements_per_run for h in repeated], '.1f')} at "
            f"throughput, {_range([h.idle_statements_per_run for h in repeated], '.1f')} "
            "one at a time (the server's: the bench's polls every 5 ms and idle loops' passes "
            "included)"
        )
    return lines


def _range(values: list[float], spec: str) -> str:
    return f"{min(values):{spec}} to {max(values):{spec}}"


def _ratio(rate: float, celery: float | None) -> str:
    return "—" if celery is None else f"{rate / celery:.2f}"
