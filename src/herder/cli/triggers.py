"""``herder trigger …``: which events start which jobs and workflows (docs/events.md). A
filter the server refuses is shown with a caret under the character it names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from herder.cli.answers import acted_on, listed, print_created, print_listing
from herder.cli.common import JsonFlag, app, client, fail, out, pairs, print_json, when
from herder.cli.ids import TRIGGER, QuietFlag, full_id, id_table
from herder.cli.views import Field, Listing, record_of
from herder.client import ApiError, HerderClient
from herder.domain.triggers import Trigger

trigger_app = typer.Typer(
    help="Triggers: which events start which jobs and workflows.", no_args_is_help=True
)
app.add_typer(trigger_app, name="trigger")

Event = Annotated[str | None, typer.Option(help="the event's name it acts on, e.g. github.push")]
Job = Annotated[str | None, typer.Option(help="the job it starts (by name)")]
Workflow = Annotated[str | None, typer.Option(help="or the workflow it starts (by name)")]
Filter = Annotated[
    str | None,
    typer.Option("--filter", help="only events for which this holds, e.g. payload.ref == 'main'"),
]
Param = Annotated[
    list[str] | None,
    typer.Option(
        "--param", help="NAME=EXPR: a parameter's value, a path into the event (payload.ref) or "
        "a literal ('main', 3); repeatable",
    ),
]  # fmt: skip
Enabled = Annotated[
    bool | None, typer.Option("--enable/--disable", help="whether events start anything")
]
_POSITION = re.compile(r"\(at character (\d+)\)")


@contextmanager
def _filter_shown(source: str | None) -> Iterator[None]:
    """A filter the server refuses, said with the filter and a caret under the character
    its message names."""
    try:
        yield
    except ApiError as error:
        found = _POSITION.search(error.detail)
        if source is None or found is None or not error.detail.startswith("filter"):
            raise
        caret = " " * (int(found.group(1)) - 1) + "^"
        raise fail(escape(f"{error}\n  {source}\n  {caret}")) from error


def _target(job: str | None, workflow: str | None) -> dict[str, Any]:
    if job is not None and workflow is not None:
        raise fail("--job and --workflow: choose one")
    if job is not None:
        return {"job": job, "workflow": None}
    if workflow is not None:
        return {"job": None, "workflow": workflow}
    return {}


def _table(triggers: list[Trigger], *, whole_ids: bool = False) -> Listing:
    """Triggers; at 80 columns the last update and whether enabled give way, and the filter
    is cut."""
    table, shown = id_table(
        (trigger.id for trigger in triggers), "NAME", "EVENT", "STARTS",
        Field("FILTER", free=True), Field("ENABLED", drop=1), Field("UPDATED", drop=2),
        whole_ids=whole_ids,
    )  # fmt: skip
    for trigger in triggers:
        starts = f"job {trigger.job}" if trigger.job else f"workflow {trigger.workflow}"
        table.add_row(
            shown[trigger.id], trigger.name, trigger.event, starts, escape(trigger.filter or ""),
            "yes" if trigger.enabled else "no", when(trigger.updated_at),
        )  # fmt: skip
    return table


def _show(trigger: Trigger, as_json: bool) -> None:
    if as_json:
        print_json(trigger)
        return
    params = [(f"param {name}", Text(source)) for name, source in trigger.params.items()]
    title = Text(f"trigger {trigger.name}", style="bold")
    out.print(record_of(title, _table([trigger], whole_ids=True), *params), highlight=False)


@trigger_app.command("create")
def trigger_create(
    name: str,
    event: Annotated[str, typer.Option(help="the event's name it acts on, e.g. github.push")],
    job: Job = None,
    workflow: Workflow = None,
    filter_source: Filter = None,
    param: Param = None,
    enabled: Enabled = True,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a trigger: events of a name (that pass the filter) start a job or a workflow,
    with parameters read from the event."""
    target = _target(job, workflow)
    if not target:
        raise fail("name what it starts: --job NAME or --workflow NAME")
    spec = {"event": event, **target, "params": pairs(param or [], "--param")}
    spec |= {"filter": filter_source, "enabled": enabled}
    with client() as herder, _filter_shown(filter_source):
        created = herder.create_trigger(name, spec)
    print_created(created, "trigger", as_json=as_json, quiet=quiet)


@trigger_app.command("list")
def trigger_list(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="how many")] = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Your tenant's triggers."""
    page = listed(HerderClient.list_triggers, limit=limit)
    print_listing(page, _table, as_json=as_json, quiet=quiet)


@trigger_app.command("show")
def trigger_show(trigger: str, as_json: JsonFlag = False) -> None:
    """A trigger, by name, id or the start of its id, with its parameters."""
    _show(acted_on(TRIGGER, trigger, HerderClient.get_trigger)[1], as_json)


@trigger_app.command("update")
def trigger_update(
    trigger: str,
    event: Event = None,
    job: Job = None,
    workflow: Workflow = None,
    filter_source: Filter = None,
    no_filter: Annotated[bool, typer.Option(help="remove the filter: every event")] = False,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", help="NAME=EXPR; the ones given replace all the parameters"),
    ] = None,
    no_params: Annotated[bool, typer.Option(help="remove every parameter")] = False,
    enabled: Enabled = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a trigger: what is not given stays."""
    if filter_source is not None and no_filter:
        raise fail("--filter and --no-filter: choose one")
    if param and no_params:
        raise fail("--param and --no-params: choose one")
    changes: dict[str, Any] = _target(job, workflow)
    given = {"event": event, "filter": filter_source, "enabled": enabled}
    changes |= {key: value for key, value in given.items() if value is not None}
    if no_filter:
        changes["filter"] = None
    if param or no_params:
        changes["params"] = pairs(param or [], "--param")
    if not changes:
        raise fail(
            "nothing to change: give --event, --job, --workflow, --filter, --param, --enable "
            "or --disable"
        )
    with client() as herder, _filter_shown(filter_source):
        _show(herder.update_trigger(full_id(herder, TRIGGER, trigger), changes), as_json)


@trigger_app.command("delete")
def trigger_delete(trigger: str) -> None:
    """Delete a trigger: its events start nothing more (those received stay)."""
    trigger, _ = acted_on(TRIGGER, trigger, HerderClient.delete_trigger)
    out.print(f"deleted trigger {trigger}")
