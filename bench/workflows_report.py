"""The workflows section of RESULTS.md: chains beside the published comparison, successor
start latency and where a link's time goes, and the fan-out."""

from __future__ import annotations

import datetime
import statistics

from bench.workflows import (
    CHAIN_CPU,
    CHAIN_LENGTH,
    CHAIN_POLL_SECONDS,
    CHAIN_REPEATS,
    COMMANDS,
    FAN_OUT,
    FAN_OUT_CPU,
    WorkflowsResult,
    median_link,
    percentile,
    successor_ms,
)

STORE_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}
CHAIN_GOAL_SECONDS = 0.5
# 40 sequential 10 ms tasks, end to end, as published by the peers (seconds)
PEERS = "Hatchet 1.2 s, Temporal 3.0 s, Windmill 4.4 s, Prefect 4.9 s, Airflow 116 s"


def chain_line(result: WorkflowsResult, job: str) -> str:
    """One line for the console."""
    chains = result.chains[job]
    server = [chain.server_seconds for chain in chains]
    latency = successor_ms(chains)
    return (
        f"{_name(result)}, chain of {CHAIN_LENGTH} `{COMMANDS[job]}`: median "
        f"{statistics.median(server):.2f}s, best {min(server):.2f}s; successor start p50 "
        f"{statistics.median(latency):.1f} ms, p99 {percentile(latency, 0.99):.1f} ms; "
        f"{result.statements_per_link[job]:.1f} statements a task"
    )


def fan_out_line(result: WorkflowsResult) -> str:
    fan = result.fan_out
    return (
        f"{_name(result)}, fan-out of {fan.items}: join started after "
        f"{fan.to_join_start_seconds:.2f}s, ended after {fan.to_end_seconds:.2f}s "
        f"({fan.runs_per_second:.0f} runs/s)"
    )


def section(
    results: list[WorkflowsResult], machine: str, when: datetime.datetime, command: str
) -> list[str]:
    lines = [
        f"\n### Workflows: chains and a fan-out, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`. One `herder server --with-scheduler` and one "
        "`herder worker` as root (defaults: up to 256 attempts at once, the machine's cores "
        "offered), with the default sandbox or `--isolation none`. A chain's tasks ask for "
        f"{CHAIN_CPU:g} cpu (one runs at a time; in the sandbox the request is the attempt's "
        "cgroup quota, and 0.01 cpu throttled `sleep 0.01` to ~170 ms a task); the fan-out's "
        f"ask for {FAN_OUT_CPU:g} cpu, as the one-off scenario's, so up to 200 run at once.\n",
        f"A chain of {CHAIN_LENGTH} tasks, each depending on the one before, {CHAIN_REPEATS} "
        "runs after one not counted. Server: the workflow run's `created_at` → `finished_at`; "
        "client: the POST sent → the poll of `GET /v1/workflow-runs/{id}` (every "
        f"{CHAIN_POLL_SECONDS * 1000:.0f} ms) that saw it ended. Successor start: a task run's "
        "`started_at` (placed on the worker) minus its parent's `finished_at`, over every link. "
        f"Goal: ≤ {CHAIN_GOAL_SECONDS} s for the chain of `true`; the published comparison for "
        f"40 sequential 10 ms tasks: {PEERS}.\n",
        "| store, worker | tasks | server median | best | client median | best "
        "| successor start p50 | p99 | max |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for job, chains in result.chains.items():
            server = [chain.server_seconds for chain in chains]
            client = [chain.client_seconds for chain in chains]
            latency = successor_ms(chains)
            lines.append(
                f"| {_name(result)} | `{COMMANDS[job]}` | **{statistics.median(server):.2f} s** "
                f"| {min(server):.2f} s | {statistics.median(client):.2f} s "
                f"| {min(client):.2f} s | {statistics.median(latency):.1f} ms "
                f"| {percentile(latency, 0.99):.1f} ms | {max(latency):.1f} ms |"
            )
    lines += [
        "",
        "Where a link's time goes (medians over every link, ms, server clock): the parent's "
        "end → the child queued (the same transaction) → placed by the dispatcher → handed to "
        "the worker by a claim (the attempt's `delivered_at`) → its end recorded (the worker "
        "starts the job, it runs, the worker reports). The sum is one link's share of the chain. "
        "Statements: what the server sent the database for one more chain (each statement, "
        "commit and rollback), less the client's polls of it, per task.",
        "",
        "| store, worker | tasks | queued | placed | delivered | ended | **link** | statements |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for job, chains in result.chains.items():
            link = median_link(chains)
            total = link.queue_ms + link.place_ms + link.deliver_ms + link.run_ms
            lines.append(
                f"| {_name(result)} | `{COMMANDS[job]}` | {link.queue_ms:.1f} "
                f"| {link.place_ms:.1f} | {link.deliver_ms:.1f} | {link.run_ms:.1f} "
                f"| **{total:.1f}** | {result.statements_per_link[job]:.1f} |"
            )
    lines += [
        "",
        f"A fan-out of {FAN_OUT:,} instances of `true` (`map_over: params.items`) joined by one "
        "`all_success` task; times from the workflow run's `created_at`.",
        "",
        "| store, worker | instances | join started | run ended | instances ended | instances/s |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        fan = result.fan_out
        lines.append(
            f"| {_name(result)} | {fan.items:,} | {fan.to_join_start_seconds:.2f} s "
            f"| {fan.to_end_seconds:.2f} s | {fan.instances_seconds:.2f} s "
            f"| **{fan.runs_per_second:.0f}** |"
        )
    return lines


def _name(result: WorkflowsResult) -> str:
    return f"{STORE_NAMES[result.store]}, {result.isolation.value}"
