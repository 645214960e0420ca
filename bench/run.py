"""``make bench``: run the scenarios and append their results to bench/RESULTS.md."""

from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
from pathlib import Path

from bench import baseline, dispatch, machine, oneoff, sandbox, schedules
from herder.store.database import sqlite_url

RESULTS = Path(__file__).parent / "RESULTS.md"
WORK = Path(__file__).parent / ".work"
POSTGRES_DATABASE = "herder_bench"


def fresh_postgres() -> str:
    for statement in (
        f"DROP DATABASE IF EXISTS {POSTGRES_DATABASE} WITH (FORCE)",
        f"CREATE DATABASE {POSTGRES_DATABASE}",
    ):
        subprocess.run(["psql", "-h", "127.0.0.1", "-d", "test", "-qc", statement], check=True)
    return f"postgresql://127.0.0.1:5432/{POSTGRES_DATABASE}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000, help="runs for the throughput part")
    parser.add_argument("--idle-runs", type=int, default=200, help="runs for the latency part")
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--scenario", choices=["oneoff", "schedules", "dispatch", "sandbox", "all"], default="all"
    )
    options = parser.parse_args()
    if options.scenario in ("sandbox", "all"):
        run_sandbox()
    if options.scenario in ("schedules", "all"):
        run_schedules()
    if options.scenario in ("dispatch", "all"):
        run_dispatch(options.store)
    if options.scenario in ("schedules", "dispatch", "sandbox"):
        return

    spawn_rate = baseline.spawn_rate()
    results = []
    for store in ("sqlite", "postgresql"):
        if options.store not in (store, "both"):
            continue
        home = WORK / store
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        url = sqlite_url(home / "herder.db") if store == "sqlite" else fresh_postgres()
        result = oneoff.measure(store, url, home, options.runs, options.idle_runs)
        results.append(result)
        print(
            f"{store}: {result.runs_per_second:.0f} runs/s ({result.runs} in "
            f"{result.seconds:.1f}s); submit→start p50 {result.start_p50_ms:.1f} ms, "
            f"p99 {result.start_p99_ms:.1f} ms"
        )
    lines = [
        f"\n### One-off runs, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine.describe()}. Plain Python spawns `/bin/true` at "
        f"{spawn_rate:.0f}/s here.\n",
        "| store | runs | end to end | runs/s | API submit rate | submit→start p50 | p99 "
        "| submit→end p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        lines.append(
            f"| {result.store} | {result.runs} | {result.seconds:.1f} s "
            f"| **{result.runs_per_second:.0f}** | {result.runs / result.submit_seconds:.0f}/s "
            f"| {result.start_p50_ms:.1f} ms | {result.start_p99_ms:.1f} ms "
            f"| {result.end_p50_ms:.1f} ms |"
        )
    lines += [
        "",
        "CPU per run during the throughput part (ms): where the time goes.",
        "",
        "| store | API server | worker agent | the jobs (`true`, reaped by the worker) "
        "| benchmark client |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        lines.append(
            f"| {result.store} | {result.per_run_ms(result.server_cpu.own):.2f} "
            f"| {result.per_run_ms(result.worker_cpu.own):.2f} "
            f"| {result.per_run_ms(result.worker_cpu.children):.2f} "
            f"| {result.per_run_ms(result.client_cpu_seconds):.2f} |"
        )
    if not RESULTS.exists():
        RESULTS.write_text("# Benchmark results\n\nAppended by `make bench`; newest last.\n")
    with RESULTS.open("a") as file:
        file.write("\n".join(lines) + "\n")
    print(f"appended to {RESULTS}")


def run_sandbox() -> None:
    costs = sandbox.measure(WORK)
    for cost in costs:
        print(f"{cost.variant}: {cost.cpu_ms:.2f} ms CPU, {cost.wall_ms:.2f} ms wall per run")
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    with RESULTS.open("a") as file:
        file.write("\n".join(sandbox.section(costs, machine.describe(), when)) + "\n")


def run_schedules() -> None:
    home = WORK / "schedules"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    result = schedules.measure(fresh_postgres(), home)
    print(
        f"schedules: {result.due} due of {result.stored} stored, all queued "
        f"{result.all_queued_seconds:.1f}s after the due instant"
    )
    lines = [
        f"\n### Cron firing, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine.describe()}. One `herder scheduler` process (8 partitions).\n",
        "| stored | due in one minute | all queued after | lateness p50 | p99 "
        "| scheduler peak memory | steady rate | steady lateness p50 | p99 |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {result.stored:,} | {result.due:,} | {result.all_queued_seconds:.1f} s "
        f"| {result.lateness_p50_ms:.0f} ms | {result.lateness_p99_ms:.0f} ms "
        f"| {result.peak_memory_mb:.0f} MB | {result.steady_rate:.0f} fires/s "
        f"| {result.steady_p50_ms:.0f} ms | {result.steady_p99_ms:.0f} ms |",
    ]
    with RESULTS.open("a") as file:
        file.write("\n".join(lines) + "\n")


def run_dispatch(stores: str) -> None:
    chosen = [store for store in ("postgresql", "sqlite") if stores in (store, "both")]
    result = dispatch.measure(chosen, WORK / "dispatch")
    for one in result.policy:
        print(
            f"dispatch policy, {one.fleet} fleet: {one.decisions_per_second:.0f} decisions/s "
            f"(pass p50 {one.median_seconds:.2f}s, {one.placed} placed)"
        )
    for store in result.stores:
        print(
            f"dispatch on {store.store}: first pass {store.passes[0].seconds:.2f}s, "
            f"steady {store.steady_median('seconds'):.2f}s"
        )
    lines = dispatch.section(result, machine.describe(), datetime.datetime.now(datetime.UTC))
    with RESULTS.open("a") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
