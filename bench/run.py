"""``make bench``: run the scenarios and append their results to bench/RESULTS.md."""

from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench import (
    api_processes,
    baseline,
    burst,
    celery_peer,
    cells,
    checkpoints,
    definitions,
    delayed,
    directory,
    dispatch,
    dispatchers,
    events,
    failover,
    forecast_accuracy,
    history_scale,
    images,
    limits,
    machine,
    migration_online,
    mix,
    oneoff,
    oneoff_report,
    pools,
    sandbox,
    schedules,
    workflows,
    workflows_report,
)
from bench.results import append as _append
from herder.settings import sqlite_url
from herder.worker.isolation import Isolation

WORK = Path(__file__).parent / ".work"
# Its own name per checkout where several share one PostgreSQL server: each run drops it.
POSTGRES_DATABASE = os.environ.get("HERDER_BENCH_DATABASE", "herder_bench")


def drop_postgres() -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-d", "test", "-qc",
         f"DROP DATABASE IF EXISTS {POSTGRES_DATABASE} WITH (FORCE)"],
        check=True,
    )  # fmt: skip


def fresh_postgres() -> str:
    for statement in (
        f"DROP DATABASE IF EXISTS {POSTGRES_DATABASE} WITH (FORCE)",
        f"CREATE DATABASE {POSTGRES_DATABASE}",
    ):
        subprocess.run(["psql", "-h", "127.0.0.1", "-d", "test", "-qc", statement], check=True)
    return f"postgresql://127.0.0.1:5432/{POSTGRES_DATABASE}"


# Settings of Herder's processes a run was made with, written before its command: the same
# command measures another protocol with them (HERDER_WORKER_STREAM=false: long-polls).
RECORDED_SETTINGS = ("HERDER_WORKER_STREAM",)


def _command() -> str:
    """How this run was started, with the settings that change what it measured."""
    settings = [f"{name}={os.environ[name]}" for name in RECORDED_SETTINGS if name in os.environ]
    return " ".join([*settings, "python -m bench.run", *sys.argv[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000, help="runs for the throughput part")
    parser.add_argument("--idle-runs", type=int, default=200, help="runs for the latency part")
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--isolation", choices=["sandbox", "none", "both"], default="both", help="Herder's worker"
    )
    parser.add_argument("--no-celery", action="store_true", help="one-off: skip the Celery peer")
    parser.add_argument(
        "--repeat", type=int, default=3, help="one-off: times each system (and Celery) is measured"
    )
    parser.add_argument(
        "--scenario",
        choices=[
            "oneoff",
            "mix",
            "schedules",
            "dispatch",
            "sandbox",
            "workflows",
            "api-processes",
            "history",
            "checkpoints",
            "pools",
            "limits",
            "delayed",
            "events",
            "forecast-accuracy",
            "images",
            "failover",
            "migration",
            "burst",
            "dispatchers",
            "directory",
            "definitions",
            "cells",
            "all",
        ],
        default="all",
    )
    options = parser.parse_args()
    if options.scenario in ("sandbox", "all"):
        run_sandbox()
    if options.scenario in ("schedules", "all"):
        run_schedules()
    if options.scenario in ("dispatch", "all"):
        run_dispatch(options.store)
    if options.scenario in ("oneoff", "all"):
        run_oneoff(options)
    if options.scenario in ("mix", "all"):
        run_mix()
    if options.scenario in ("workflows", "all"):
        run_workflows(options)
    if options.scenario in ("api-processes", "all"):
        run_api_processes()
    if options.scenario in ("pools", "all"):
        run_pools()
    if options.scenario in ("limits", "all"):
        run_limits()
    if options.scenario in ("delayed", "all"):
        run_delayed()
    if options.scenario in ("events", "all"):
        run_events()
    if options.scenario in ("forecast-accuracy", "all"):
        run_forecast_accuracy()
    if options.scenario in ("checkpoints", "all"):
        run_checkpoints(options)
    if options.scenario in ("images", "all"):
        run_images()
    if options.scenario in ("burst", "all"):
        burst_result = burst.measure()
        _record(burst_result.line(), functools.partial(burst.section, burst_result))
    if options.scenario in ("dispatchers", "all"):
        partitioned = dispatchers.measure()
        _record(dispatchers.line(partitioned), functools.partial(dispatchers.section, partitioned))
    if options.scenario in ("directory", "all"):
        homes = directory.measure()
        _record(homes.line(), functools.partial(directory.section, homes))
    if options.scenario in ("failover", "all"):
        run_failover(options)
    if options.scenario in ("migration", "all"):
        command = _command()
        _append(migration_online.report(migration_online.DEFAULT_RUNS, command))
    if options.scenario == "history":  # not in "all": ten million runs take a while to make
        run_history()
    if options.scenario == "definitions":  # not in "all": ten million rows take a while too
        run_definitions()
    if options.scenario in ("cells", "all"):
        run_cells()


def _record(line: str, section: Callable[[str, datetime.datetime, str], list[str]]) -> None:
    """Print a scenario's line and append its section, made for this machine, now and this
    command."""
    print(line)
    _append(section(machine.describe(), datetime.datetime.now(datetime.UTC), _command()))


def run_oneoff(options: argparse.Namespace) -> None:
    """Spawn limits, then the Celery peer, then Herder: one at a time, each on a quiet box,
    each ``--repeat`` times on a fresh system (one hour's figures vary: the spread says by how
    much)."""
    limits = baseline.spawn_limits()
    print(
        f"spawn limits from 2 threads: plain {limits.plain:.0f}/s, unshare {limits.unshare:.0f}/s"
    )
    peers = []
    for _ in range(0 if options.no_celery else options.repeat):
        peers += celery_peer.measure(options.runs, WORK / "celery.log")
    for peer in peers:
        print(f"celery ({peer.variant}): {peer.tasks_per_second:.0f} tasks/s")
    stores = [store for store in ("postgresql", "sqlite") if options.store in (store, "both")]
    isolations = [choice for choice in Isolation if options.isolation in (choice.value, "both")]
    results = []
    for store, isolation, _ in itertools.product(stores, isolations, range(options.repeat)):
        home = WORK / f"{store}-{isolation.value}"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        url = sqlite_url(home / "herder.db") if store == "sqlite" else fresh_postgres()
        result = oneoff.measure(store, url, home, isolation, options.runs, options.idle_runs)
        results.append(result)
        print(
            f"{store}, {isolation.value}: {result.runs_per_second:.0f} runs/s "
            f"({result.runs} in {result.seconds:.1f}s, API took them at "
            f"{result.runs / result.submit_seconds:.0f}/s); submit→start p50 "
            f"{result.start_p50_ms:.1f} ms, p99 {result.start_p99_ms:.1f} ms; control plane "
            f"{result.per_run_ms(result.control_plane_seconds):.2f} ms/run"
        )
    command = _command()
    now = datetime.datetime.now(datetime.UTC)
    _append(oneoff_report.section(peers, results, limits, machine.describe(), now, command))


def run_workflows(options: argparse.Namespace) -> None:
    """Each store with each worker isolation on a fresh system; its home and database are
    removed afterwards."""
    stores = [store for store in ("postgresql", "sqlite") if options.store in (store, "both")]
    isolations = [choice for choice in Isolation if options.isolation in (choice.value, "both")]
    results = []
    for store, isolation in itertools.product(stores, isolations):
        home = WORK / f"workflows-{store}-{isolation.value}"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        url = sqlite_url(home / "herder.db") if store == "sqlite" else fresh_postgres()
        try:
            result = workflows.measure(store, url, home, isolation)
        finally:
            shutil.rmtree(home, ignore_errors=True)
            if store == "postgresql":
                drop_postgres()
        results.append(result)
        for job in result.chains:
            print(workflows_report.chain_line(result, job))
        print(workflows_report.fan_out_line(result))
    command = _command()
    now = datetime.datetime.now(datetime.UTC)
    _append(workflows_report.section(results, machine.describe(), now, command))


def run_checkpoints(options: argparse.Namespace) -> None:
    """Suspend and resume with checkpoints of 0, 10 and 256 MiB, each store and isolation."""
    stores = [store for store in ("postgresql", "sqlite") if options.store in (store, "both")]
    isolations = [choice for choice in Isolation if options.isolation in (choice.value, "both")]
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    lines = [f"\n### Checkpoints: suspend and resume, {when} UTC",
             "", f"Machine: {machine.describe()}", "",
             "`python -m bench.run " + " ".join(sys.argv[1:]) + "` (bench/checkpoints.py)", "",
             "```"]  # fmt: skip
    for store, isolation in itertools.product(stores, isolations):
        home = WORK / f"checkpoints-{store}-{isolation.value}"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        url = sqlite_url(home / "herder.db") if store == "sqlite" else fresh_postgres()
        try:
            medians = checkpoints.measure(url, home, isolation, repeats=3)
        finally:
            shutil.rmtree(home, ignore_errors=True)
            if store == "postgresql":
                drop_postgres()
        measured = checkpoints.report(store, isolation.value, medians)
        print("\n".join(measured))
        lines += measured
    _append([*lines, "```"])


def run_api_processes() -> None:
    home = WORK / "api-processes"
    shutil.rmtree(home, ignore_errors=True)
    try:
        results = api_processes.measure(home, fresh_postgres)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        drop_postgres()
    for result in results:
        print(
            f"--processes {result.processes}: {result.per_second:.0f} submissions/s, API CPU "
            f"{result.api_cpu_ms:.2f} ms each, {result.refused} refused"
        )
    command = _command()
    now = datetime.datetime.now(datetime.UTC)
    _append(api_processes.section(results, machine.describe(), now, command))


def run_failover(options: argparse.Namespace) -> None:
    """The primary lost under load, at each isolation asked for (``--isolation``)."""
    chosen = (
        [Isolation.NONE, Isolation.SANDBOX]
        if options.isolation == "both"
        else [Isolation(options.isolation)]
    )
    results = []
    for isolation in chosen:
        work = WORK / f"failover-{isolation.value}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            results.append(failover.measure(work, isolation))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"{results[-1].line()} (worker isolation {isolation.value})")
    command = _command()
    now = datetime.datetime.now(datetime.UTC)
    _append(failover.section(results, machine.describe(), now, command))


def run_cells() -> None:
    """Two cells behind an edge, one lost under load, a tenant moved (bench/cells.py); its
    homes and directory removed afterwards."""
    work = WORK / "cells"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        result = cells.measure(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    command = " ".join(filter(None, [cells.knobs_set(), _command()]))
    print(result.line())
    now = datetime.datetime.now(datetime.UTC)
    _append(cells.section(result, machine.describe(), now, command))


def run_definitions() -> None:
    """The definitions tables at a cell's size (bench/definitions.py), on a database of
    their own, dropped afterwards; the sizes set by the environment written in the command."""
    result = definitions.measure()
    knobs = [
        f"{name}={value}"
        for name, value in os.environ.items()
        if name.startswith("BENCH_DEFINITIONS_")
    ]
    command = " ".join([*knobs, _command()])
    print(result.line())
    now = datetime.datetime.now(datetime.UTC)
    _append(definitions.section(result, machine.describe(), now, command))


def run_history() -> None:
    """``BENCH_HISTORY_RUNS`` ended runs (default ten million) on a fresh database, dropped
    afterwards."""
    try:
        result = history_scale.measure(fresh_postgres(), history_scale.DEFAULT_RUNS)
    finally:
        drop_postgres()
    print(result.plan)
    command = _command()
    if history_scale.DEFAULT_RUNS != 10_000_000:
        command = f"BENCH_HISTORY_RUNS={history_scale.DEFAULT_RUNS} {command}"
    now = datetime.datetime.now(datetime.UTC)
    _append(history_scale.section(result, machine.describe(), now, command))


def run_mix() -> None:
    home = WORK / "mix"
    shutil.rmtree(home, ignore_errors=True)
    steps = mix.measure(fresh_postgres, home)
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    _append(mix.section(steps, machine.describe(), when))


def run_images() -> None:
    lines = images.run()
    print("\n".join(lines))
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    _append(images.section(lines, machine.describe(), when))


def run_sandbox() -> None:
    costs = sandbox.measure(WORK)
    for cost in costs:
        print(f"{cost.variant}: {cost.cpu_ms:.2f} ms CPU, {cost.wall_ms:.2f} ms wall per run")
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    _append(sandbox.section(costs, machine.describe(), when))


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
    _append(lines)


def run_pools() -> None:
    comparisons = pools.compare_policy()
    through_store = pools.compare_store()
    forecast = pools.measure_forecast(fresh_postgres())
    lines = [
        f"\n### Pools and the forecast, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine.describe()}. `python -m bench.run --scenario pools`.\n",
        "Dispatcher policy alone, 10,000 queued x 500 workers x 100 tenants, without pools and "
        "split into 10 pools (median of 5 `plan()` passes, same process):\n",
        "| fleet | without pools | 10 pools | ratio | placed (without / with) | borrowed "
        "| preemptions |",
        "|---|---|---|---|---|---|---|",
    ]
    for one in comparisons:
        print(
            f"pools, {one.fleet}: plan {one.plain_seconds:.3f}s without, "
            f"{one.pooled_seconds:.3f}s with 10 pools"
        )
        lines.append(
            f"| {one.fleet} | {one.plain_seconds:.3f} s | {one.pooled_seconds:.3f} s "
            f"| {one.pooled_seconds / one.plain_seconds:.2f}x | {one.plain_placed} / "
            f"{one.pooled_placed} | {one.pooled_borrowed} | {one.pooled_preemptions} |"
        )
    print(
        f"forecast over {forecast.schedules:,} schedules: {forecast.every_pool_seconds:.2f}s "
        f"(every pool), {forecast.one_pool_seconds:.2f}s (one pool)"
    )
    lines += [
        "",
        "Through the store (PostgreSQL, real `Dispatcher.step()` passes, every worker idle at "
        "first; as the dispatch scenario):",
        "",
        "| | first pass | steady pass (median) | placed in the first |",
        "|---|---|---|---|",
    ]
    for label, result in (
        ("without pools", through_store.plain),
        ("10 pools", through_store.pooled),
    ):
        print(
            f"pools, store {label}: first {result.passes[0].seconds:.2f}s, "
            f"steady {result.steady_median('seconds'):.3f}s"
        )
        lines.append(
            f"| {label} | {result.passes[0].seconds:.2f} s "
            f"| {result.steady_median('seconds'):.3f} s | {result.passes[0].placed} |"
        )
    lines += [
        "",
        f"Forecast for the next hour over {forecast.schedules:,} schedules on PostgreSQL "
        f"({forecast.groups_note}), median of 3: every pool "
        f"**{forecast.every_pool_seconds:.2f} s**, one pool {forecast.one_pool_seconds:.2f} s.",
    ]
    _append(lines)


def run_delayed() -> None:
    results = [
        delayed.measure(fresh_postgres()),
        delayed.measure(fresh_postgres(), spread_seconds=0),
    ]
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        f"\n### Delayed runs, {now:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine.describe()}. `python -m bench.run --scenario delayed`: 100,000 runs "
        "`scheduled` on PostgreSQL, their starts spread evenly over one minute, or all at one "
        "instant; queued by the real `starter` loop paced by its own answer; lateness from "
        "each run's `run_at` to the commit of the batch that queued it.\n",
        "| starts | runs | lateness p50 | p99 | max | batches |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        spread = f"over {result.spread_seconds:.0f} s" if result.spread_seconds else "one instant"
        print(
            f"delayed, {spread}: {result.runs:,} runs queued {result.lateness_p50:.3f}s after "
            f"their time (p50), {result.lateness_p99:.3f}s (p99), {result.lateness_max:.3f}s max"
        )
        lines.append(
            f"| {spread} | {result.runs:,} | {result.lateness_p50:.3f} s "
            f"| {result.lateness_p99:.3f} s | {result.lateness_max:.3f} s | {result.batches:,} |"
        )
    _append(lines)


def run_events() -> None:
    home = WORK / "events"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    result = events.measure(fresh_postgres(), home)
    cost = events.waiting_cost()
    now = datetime.datetime.now(datetime.UTC)
    plain, waiting = (one.steady_median("seconds") for one in (cost.plain, cost.waiting))
    print(
        f"events: event→start p50 {result.event_start_p50_ms:.1f} ms p99 "
        f"{result.event_start_p99_ms:.1f} ms (submit→start {result.submit_start_p50_ms:.1f} / "
        f"{result.submit_start_p99_ms:.1f} ms); burst {result.burst_events:,} events → "
        f"{result.burst_runs:,} runs ({result.burst_distinct_runs:,} distinct) in "
        f"{result.burst_seconds:.1f} s; approve→successor p50 {result.approval_p50_ms:.1f} ms; "
        f"steady pass {plain:.3f} s, with {events.WAITING:,} waiting tasks {waiting:.3f} s"
    )
    _append(
        [
            f"\n### Events, triggers and waiting tasks, {now:%Y-%m-%d %H:%M} UTC\n",
            f"Machine: {machine.describe()}. `python -m bench.run --scenario events`: a server "
            "with its loops and one worker (isolation `none`) on PostgreSQL; a trigger starts "
            "`true` for each event.\n",
            "| measure | Herder | beside it |",
            "|---|---|---|",
            f"| event accepted → run started, idle, p50 / p99 | {result.event_start_p50_ms:.1f} / "
            f"{result.event_start_p99_ms:.1f} ms | submit → start {result.submit_start_p50_ms:.1f}"
            f" / {result.submit_start_p99_ms:.1f} ms |",
            f"| {events.BURST:,} events at once ({events.THREADS} clients), then "
            f"{events.RESENT:,} resent | {result.burst_events:,} events, {result.burst_runs:,} runs"
            f" ({result.burst_distinct_runs:,} distinct), all ended {result.burst_seconds:.1f} s "
            f"after the first | {result.resent_duplicates:,} resent answered as duplicates |",
            f"| approve → successor started, p50 / p99 | {result.approval_p50_ms:.1f} / "
            f"{result.approval_p99_ms:.1f} ms | |",
            f"| dispatcher steady pass, 10,000 queued, 500 workers | {plain:.3f} s | with "
            f"{events.WAITING:,} waiting tasks: {waiting:.3f} s |",
        ]
    )


def run_limits() -> None:
    compared = limits.compare_store()
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        f"\n### Limits by key in the dispatcher, {now:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine.describe()}. `python -m bench.run --scenario limits`: the dispatch "
        "scenario's 10,000 queued runs of 100 tenants on 500 idle workers, through real "
        "`Dispatcher.step()` passes on PostgreSQL; with limits, each run counts against its "
        "tenant's limit under its own key (10,000 keys, max_running 1) or one of 10 (max_running "
        "100, or 5: binding; 1,000 starts a minute).\n",
        "| | first pass | ratio | steady pass (median) | ratio | placed in the first "
        "| waiting in the steady |",
        "|---|---|---|---|---|---|---|",
    ]
    plain = compared.plain
    for label, result in (
        ("no limits", plain),
        ("10,000 keys", compared.distinct_keys),
        ("10 keys", compared.ten_keys),
        ("10 keys, binding", compared.ten_keys_binding),
    ):
        first, steady = result.passes[0].seconds, result.steady_median("seconds")
        print(f"limits, {label}: first {first:.2f}s, steady {steady:.3f}s")
        lines.append(
            f"| {label} | {first:.2f} s | {first / plain.passes[0].seconds:.2f}x "
            f"| {steady:.3f} s | {steady / plain.steady_median('seconds'):.2f}x "
            f"| {result.passes[0].placed} | {result.steady_median('queued'):,.0f} |"
        )
    _append(lines)


def run_forecast_accuracy() -> None:
    result = forecast_accuracy.measure(fresh_postgres(), WORK / "forecast-accuracy")
    for minute in result.minutes:
        print(
            f"forecast {minute.at:%H:%M}: starting {minute.forecast_starting} / "
            f"{minute.actual_starting}, cpu {minute.forecast_cpu:g} / {minute.actual_cpu:g}"
        )
    print(f"forecast: peak cpu error {result.cpu_error:.0%}")
    when = datetime.datetime.now(datetime.UTC)
    _append(forecast_accuracy.section(result, machine.describe(), when))


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
    _append(dispatch.section(result, machine.describe(), datetime.datetime.now(datetime.UTC)))


if __name__ == "__main__":
    main()
