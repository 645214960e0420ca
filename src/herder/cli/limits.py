"""``herder limit …``: a tenant's named limits by key (docs/flow-control.md) — made and
changed by developers, read by any key — and the keys with active runs."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from herder.cli.answers import acted_on, listed, print_created, print_listing
from herder.cli.common import JsonFlag, app, client, fail, out, print_json, when
from herder.cli.ids import LIMIT, QuietFlag, full_id, id_table
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.limits import DebounceKeep as DebounceKeeping
from herder.domain.limits import Limit, LimitStrategy

limit_app = typer.Typer(help="Limits by key: concurrency, rate, strategy.", no_args_is_help=True)
app.add_typer(limit_app, name="limit")

MaxRunning = Annotated[int | None, typer.Option(help="at most this many active runs per key")]
Rate = Annotated[
    str | None,
    typer.Option(help="COUNT/SECONDS: at most COUNT starts per key in any SECONDS", metavar="N/S"),
]
Strategy = Annotated[
    LimitStrategy | None, typer.Option(help="what a submission to a full key does")
]
Description = Annotated[str | None, typer.Option(help="what the limit is for")]
DebounceWindow = Annotated[
    int | None,
    typer.Option("--debounce", help="SECONDS: fold a key's submissions within them into one run"),
]
DebounceKeep = Annotated[
    DebounceKeeping | None, typer.Option(help="the folded run's values: the first's or the last's")
]
DebounceMaxWait = Annotated[
    int | None, typer.Option(help="SECONDS after the first submission it starts at the latest")
]


def _rate(text: str) -> dict[str, Any]:
    """COUNT/SECONDS as the API's ``rate``; a number out of bounds is the server's to refuse
    by name (``rate.count``)."""
    count, _, period = text.partition("/")
    try:
        return {"count": int(count), "period_seconds": int(period)}
    except ValueError:
        raise fail(f"--rate {text!r} must look like COUNT/SECONDS, e.g. 10/60") from None


def _debounce(
    window: int | None, keep: DebounceKeeping | None, max_wait: int | None
) -> dict[str, Any] | None:
    """The API's ``debounce`` from the three options (None: none given)."""
    if window is None:
        if keep is not None or max_wait is not None:
            raise fail("--debounce-keep and --debounce-max-wait need --debounce SECONDS")
        return None
    debounce: dict[str, Any] = {"window_seconds": window}
    if keep is not None:
        debounce["keep"] = keep.value
    if max_wait is not None:
        debounce["max_wait_seconds"] = max_wait
    return debounce


def _fields(
    max_running: int | None,
    rate: str | None,
    strategy: LimitStrategy | None,
    description: str | None,
    debounce: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if debounce is not None:
        spec["debounce"] = debounce
    if max_running is not None:
        spec["max_running"] = max_running
    if rate is not None:
        spec["rate"] = _rate(rate)
    if strategy is not None:
        spec["strategy"] = strategy.value
    if description is not None:
        spec["description"] = description
    return spec


def _table(limits: list[Limit], *, whole_ids: bool = False) -> Listing:
    """Limits; at 80 columns the creation and the debounce give way, in that order."""
    table, shown = id_table(
        (limit.id for limit in limits), "NAME", "MAX RUNNING", "RATE", "STRATEGY",
        Field("DEBOUNCE", drop=1), Field("CREATED", drop=2), whole_ids=whole_ids,
    )  # fmt: skip
    for limit in limits:
        rate = f"{limit.rate.count}/{limit.rate.period_seconds}s" if limit.rate else ""
        folds = limit.debounce
        debounce = f"{folds.window_seconds}s, {folds.keep.value}" if folds else ""
        table.add_row(
            shown[limit.id], limit.name, str(limit.max_running or ""), rate, limit.strategy.value,
            debounce, when(limit.created_at),
        )  # fmt: skip
    return table


def _show(limit: Limit, as_json: bool) -> None:
    if as_json:
        print_json(limit)
        return
    title = Text(f"limit {limit.name}", style="bold")
    description = ("description", Text(limit.description) if limit.description else None)
    out.print(record_of(title, _table([limit], whole_ids=True), description))


@limit_app.command("create")
def limit_create(
    name: str,
    max_running: MaxRunning = None,
    rate: Rate = None,
    strategy: Strategy = None,
    description: Description = None,
    debounce: DebounceWindow = None,
    debounce_keep: DebounceKeep = None,
    debounce_max_wait: DebounceMaxWait = None,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a limit; it bounds something: --max-running, --rate or --debounce."""
    folds = _debounce(debounce, debounce_keep, debounce_max_wait)
    with client() as herder:
        created = herder.create_limit(
            name, _fields(max_running, rate, strategy, description, folds)
        )
    print_created(created, "limit", as_json=as_json, quiet=quiet)


@limit_app.command("list")
def limit_list(limit: int = 100, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    """Your tenant's limits, newest first."""
    page = listed(HerderClient.list_limits, limit=limit)
    print_listing(page, _table, as_json=as_json, quiet=quiet)


@limit_app.command("show")
def limit_show(limit: str, as_json: JsonFlag = False) -> None:
    """A limit, by name, id or the start of its id."""
    _show(acted_on(LIMIT, limit, HerderClient.get_limit)[1], as_json)


@limit_app.command("update")
def limit_update(
    limit: str,
    max_running: MaxRunning = None,
    rate: Rate = None,
    no_rate: Annotated[bool, typer.Option(help="remove the rate")] = False,
    strategy: Strategy = None,
    description: Description = None,
    debounce: DebounceWindow = None,
    debounce_keep: DebounceKeep = None,
    debounce_max_wait: DebounceMaxWait = None,
    no_debounce: Annotated[bool, typer.Option(help="stop debouncing")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Change a limit: what is not given stays (--debounce replaces the whole debounce)."""
    if rate and no_rate:
        raise fail("--rate and --no-rate: choose one")
    if debounce is not None and no_debounce:
        raise fail("--debounce and --no-debounce: choose one")
    folds = _debounce(debounce, debounce_keep, debounce_max_wait)
    changes = _fields(max_running, rate, strategy, description, folds)
    if no_rate:
        changes["rate"] = None
    if no_debounce:
        changes["debounce"] = None
    if not changes:
        raise fail(
            "nothing to change: give --max-running, --rate, --strategy, --debounce or --description"
        )
    with client() as herder:
        _show(herder.update_limit(full_id(herder, LIMIT, limit), changes), as_json)


@limit_app.command("delete")
def limit_delete(limit: str) -> None:
    """Delete a limit; refused while jobs, schedules or workflows name it."""
    limit, _ = acted_on(LIMIT, limit, HerderClient.delete_limit)
    out.print(f"deleted limit {limit}")


@limit_app.command("keys")
def limit_keys(
    limit: str,
    count: Annotated[int, typer.Option("--limit", help="at most this many keys")] = 20,
    as_json: JsonFlag = False,
) -> None:
    """The limit's keys with active runs, busiest first."""
    with client() as herder:
        keys = herder.limit_keys(full_id(herder, LIMIT, limit), count=count)
    if as_json:
        print_json(list(keys))
        return
    table = Listing("KEY", "RUNNING", "QUEUED", "SCHEDULED")
    for usage in keys:
        table.add_row(usage.key, str(usage.running), str(usage.queued), str(usage.scheduled))
    out.print(table)
