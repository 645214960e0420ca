"""``herder pool …``: resource pools, their workers (by selector) and the tenants' shares of
them (docs/pools.md). Made and changed by system admins; any key lists the pools its tenant
may use."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.text import Text

from herder.cli.answers import acted_on, listed, print_created, print_listing
from herder.cli.common import JsonFlag, app, client, fail, out, pairs, print_json, when
from herder.cli.ids import (
    POOL,
    TENANT,
    QuietFlag,
    full_id,
    id_table,
    names_of,
    short_ids,
    tenant_of,
)
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.pools import Pool, PoolShare

pool_app = typer.Typer(help="Resource pools and the tenants' shares of them.", no_args_is_help=True)
app.add_typer(pool_app, name="pool")

SHARE_FIELDS = ("cpu", "memory_mb", "gpus")

Selector = Annotated[
    list[str],
    typer.Option(help="KEY=VALUE a worker's labels must hold, repeatable (default: pool=NAME)"),
]
Share = Annotated[
    list[str],
    typer.Option(
        help="TENANT=cpu=8,memory_mb=16384,gpus=4: a tenant (name or id) that may use the pool "
        "and its nominal share (left out: 0, borrowing only); repeatable",
        metavar="TENANT=SHARE",
    ),
]
Description = Annotated[str | None, typer.Option(help="what the pool is for")]
Autoscaling = Annotated[
    str | None,
    typer.Option(
        help='its autoscaling policy as JSON, e.g. \'{"worker": {"cpu": 8, "memory_mb": 32768, '
        '"slots": 64}, "max_workers": 40}\' (docs/autoscaling.md); "null" turns it off',
        metavar="JSON",
    ),
]


def _autoscaling(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise fail(f"--autoscaling is not JSON: {error}") from error


def _number(text: str) -> Any:
    """As typed: a number when it reads as one; else the text, for the server to refuse by
    name (``shares.0.cpu``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _shares(herder: HerderClient, given: list[str]) -> list[dict[str, Any]]:
    shares = []
    for item in given:
        tenant, _, amounts = item.partition("=")
        if not tenant:
            raise fail(f"--share {item!r} must look like TENANT=cpu=8,memory_mb=16384,gpus=4")
        share: dict[str, Any] = {}
        for amount in filter(None, amounts.split(",")):
            key, sep, value = amount.partition("=")
            if not sep or key not in SHARE_FIELDS:
                raise fail(f"--share {item!r}: {amount!r} is not one of cpu=, memory_mb=, gpus=")
            share[key] = _number(value)
        tenant_id = tenant_of(herder, tenant).id
        shares.append({"tenant_id": tenant_id, **share})
    return shares


def _share_text(share: PoolShare, tenants: dict[str, str]) -> str:
    tenant = tenants.get(share.tenant_id, share.tenant_id)
    return f"{tenant}: cpu {share.cpu:g}, memory {share.memory_mb} MB, gpus {share.gpus}"


def _pool_table(pools: list[Pool], *, whole_ids: bool = False) -> Listing:
    """Pools; at 80 columns the creation gives way, and the selector is cut."""
    table, shown = id_table(
        (pool.id for pool in pools), "NAME", Field("SELECTOR", free=True), "WORKERS", "SHARES",
        Field("CREATED", drop=1), whole_ids=whole_ids,
    )  # fmt: skip
    for pool in pools:
        selector = ", ".join(f"{key}={value}" for key, value in sorted(pool.selector.items()))
        table.add_row(
            shown[pool.id], pool.name, selector, str(pool.workers), str(len(pool.shares)),
            when(pool.created_at),
        )  # fmt: skip
    return table


def _print_pool(herder: HerderClient, pool: Pool) -> None:
    tenants = names_of(herder, TENANT, (share.tenant_id for share in pool.shares))
    shares = [("share", _share_text(share, tenants)) for share in pool.shares]
    title = Text(f"pool {pool.name}", style="bold")
    description = ("description", pool.description or None)
    out.print(record_of(title, _pool_table([pool], whole_ids=True), description, *shares))


@pool_app.command("create")
def pool_create(
    name: str,
    selector: Selector = [],  # noqa: B006
    share: Share = [],  # noqa: B006
    description: Description = None,
    autoscaling: Autoscaling = None,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a pool (system admins)."""
    with client() as herder:
        spec: dict[str, Any] = {"shares": _shares(herder, share)}
        if selector:
            spec["selector"] = pairs(selector, "selector")
        if description is not None:
            spec["description"] = description
        if autoscaling is not None:
            spec["autoscaling"] = _autoscaling(autoscaling)
        created = herder.create_pool(name, spec)
    print_created(created, "pool", as_json=as_json, quiet=quiet)


@pool_app.command("list")
def pool_list(limit: int = 100, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    """List pools, newest first: all of them for a system admin, else those your tenant may
    use."""
    page = listed(HerderClient.list_pools, limit=limit)
    print_listing(page, _pool_table, as_json=as_json, quiet=quiet)


@pool_app.command("show")
def pool_show(pool: str, as_json: JsonFlag = False) -> None:
    """Show a pool (by name, id or the start of its id) with its shares (yours only, unless a
    system admin)."""
    with client() as herder:
        found = herder.get_pool(full_id(herder, POOL, pool))
        if as_json:
            print_json(found)
        else:
            _print_pool(herder, found)


@pool_app.command("update")
def pool_update(
    pool: str,
    selector: Selector = [],  # noqa: B006
    default_selector: Annotated[
        bool, typer.Option(help="go back to the default selector, pool=NAME")
    ] = False,
    share: Annotated[
        list[str], typer.Option(help="as for create; the shares given replace all of them")
    ] = [],  # noqa: B006
    no_shares: Annotated[bool, typer.Option(help="remove every share")] = False,
    description: Description = None,
    autoscaling: Autoscaling = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a pool (system admins): what is not given stays."""
    if selector and default_selector:
        raise fail("--selector and --default-selector: choose one")
    if share and no_shares:
        raise fail("--share and --no-shares: choose one")
    with client() as herder:
        changes: dict[str, Any] = {}
        if selector or default_selector:
            changes["selector"] = pairs(selector, "selector") if selector else None
        if share or no_shares:
            changes["shares"] = _shares(herder, share)
        if description is not None:
            changes["description"] = description
        if autoscaling is not None:
            changes["autoscaling"] = _autoscaling(autoscaling)
        if not changes:
            raise fail(
                "nothing to change: give --selector, --share, --description, --autoscaling or "
                "a --no-…"
            )
        updated = herder.update_pool(full_id(herder, POOL, pool), changes)
        if as_json:
            print_json(updated)
        else:
            _print_pool(herder, updated)


@pool_app.command("autoscaling")
def pool_autoscaling(pool: str, as_json: JsonFlag = False) -> None:
    """How many workers an autoscaled pool should have now, and why (system admins)."""
    with client() as herder:
        view = herder.pool_autoscaling(full_id(herder, POOL, pool))
    if as_json:
        print_json(view)
        return
    out.print(f"pool [bold]{view.pool}[/]: {view.desired_workers} workers wanted")
    for label, demand in (("running", view.running), ("queued", view.queued),
                          ("forecast peak", view.forecast_peak)):  # fmt: skip
        out.print(
            f"  {label}: cpu {demand.cpu:g}, {demand.memory_mb} MB, {demand.gpus} GPUs, "
            f"{demand.runs} runs"
        )
    workers = short_ids(worker.id for worker in view.workers)
    table = Listing("WORKER", "RUNNING", "DRAINING")
    for worker in view.workers:
        table.add_row(workers[worker.id], str(worker.running), "yes" if worker.draining else "")
    out.print(table)


@pool_app.command("delete")
def pool_delete(pool: str) -> None:
    """Delete a pool (system admins). Runs that name it wait, not lost, until a pool of that
    name exists again."""
    pool, _ = acted_on(POOL, pool, HerderClient.delete_pool)
    out.print(f"deleted pool {pool}")


@app.command("forecast")
def forecast(
    pool: Annotated[str | None, typer.Option(help="one pool (default: every pool)")] = None,
    minutes: Annotated[int, typer.Option(min=1, max=1440, help="how far ahead")] = 60,
    as_json: JsonFlag = False,
) -> None:
    """What the schedules foretell, a minute at a time: runs starting, and what they keep
    busy at each minute's peak (docs/autoscaling.md#forecast). Minutes with nothing are left
    out of the table."""
    with client() as herder:
        found = herder.forecast(pool=pool, minutes=minutes)
    if as_json:
        print_json(found)
        return
    table = Listing("MINUTE (UTC)", "STARTING", "CPU", "MEMORY MB", "GPUS", "RUNS BUSY")
    for minute in found.minutes:
        if minute.runs_starting or minute.runs:
            table.add_row(
                minute.at.strftime("%Y-%m-%d %H:%M"), str(minute.runs_starting),
                f"{minute.cpu:g}", str(minute.memory_mb), str(minute.gpus), str(minute.runs),
            )  # fmt: skip
    out.print(table)
