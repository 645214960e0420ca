"""``herder event …``: send an event and see at once what its triggers started (or why
not), list the events received, show one with its payload (docs/events.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from herder.cli.common import JsonFlag, app, client, fail, out, print_json, when
from herder.cli.ids import EVENT, QuietFlag, full_id, id_table, quiet_ids
from herder.cli.views import Field, record
from herder.domain.events import EventSummary, TriggerOutcome

event_app = typer.Typer(
    help="Events: send one, and see what its triggers started.", no_args_is_help=True
)
app.add_typer(event_app, name="event")

STDIN = Path("-")


def _payload(text: str | None, file: Path | None) -> Any:
    """The payload as JSON, from ``--payload`` or a file (``-``: standard input); ``{}``
    when neither is given."""
    if text is not None and file is not None:
        raise fail("--payload and --payload-file: choose one")
    where = "--payload"
    if file is not None:
        where = "standard input" if file == STDIN else str(file)
        try:
            text = sys.stdin.read() if file == STDIN else file.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise fail(f"cannot read {file}: {error}") from error
    if text is None:
        return {}
    try:
        return json.loads(text)
    except ValueError as error:
        raise fail(f"the payload in {where} is not JSON: {error}") from None


def print_outcomes(outcomes: list[TriggerOutcome]) -> None:
    """What each matching trigger did: the run it started, or why it could not."""
    if not outcomes:
        out.print("no trigger matched: nothing was started")
    for outcome in outcomes:
        if outcome.run_id is not None:
            did = f"started run {outcome.run_id}"
        elif outcome.workflow_run_id is not None:
            did = f"started workflow run {outcome.workflow_run_id}"
        else:
            did = f"[red]not started:[/] {escape(outcome.error or '')}"
        out.print(f"  trigger {outcome.trigger_name}: {did}", highlight=False)


def _started(event: EventSummary) -> str:
    started = sum(1 for one in event.outcomes if one.error is None)
    failed = len(event.outcomes) - started
    return f"{started}" + (f" ({failed} not started)" if failed else "")


@event_app.command("send")
def event_send(
    name: str,
    from_stdin: Annotated[
        Path | None,
        typer.Argument(metavar="-", help="-: read the JSON payload from standard input"),
    ] = None,
    payload: Annotated[str | None, typer.Option(help="the payload as JSON")] = None,
    payload_file: Annotated[
        Path | None, typer.Option(help="read the JSON payload from this file ('-': stdin)")
    ] = None,
    event_id: Annotated[
        str | None,
        typer.Option("--id", help="your id of the event: sent again, it starts nothing"),
    ] = None,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Send an event: its triggers start their jobs and workflows at once; each one's
    outcome is printed."""
    if from_stdin is not None:
        if from_stdin != STDIN or payload_file is not None:
            raise fail(f"unexpected {from_stdin}: give - alone, for the payload on stdin")
        payload_file = STDIN
    body = _payload(payload, payload_file)
    with client() as herder:
        received = herder.send_event(name, body, event_id=event_id)
    if as_json:
        print_json(received)
        return
    event = received.event
    if quiet:
        quiet_ids([event.id])
        return
    if received.duplicate:
        out.print(
            f"event {event.id}: already received under id {event.sender_id} "
            f"({when(event.received_at)}); nothing was started again",
            highlight=False,
        )
        return
    out.print(f"event {event.id} ({event.name})", highlight=False)
    print_outcomes(event.outcomes)


@event_app.command("list")
def event_list(
    name: Annotated[str | None, typer.Option(help="only events of this name")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="how many, newest first")] = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Events received (kept 30 days), newest first."""
    with client() as herder:
        page = herder.list_events(name=name, limit=limit)
    if as_json:
        print_json(page)
        return
    if quiet:
        quiet_ids(event.id for event in page.items)
        return
    table, shown = id_table(
        (event.id for event in page.items),
        "NAME",
        Field("SOURCE", drop=1),
        Field("SENDER ID", drop=2),
        "RECEIVED",
        Field("STARTED", free=True),
    )
    for event in page.items:
        table.add_row(
            shown[event.id], event.name, event.source, event.sender_id or "",
            when(event.received_at), _started(event),
        )  # fmt: skip
    out.print(table)


@event_app.command("show")
def event_show(event_id: str, as_json: JsonFlag = False) -> None:
    """An event (by id or the start of its id): where it came from, its payload, and what
    its triggers did."""
    with client() as herder:
        event = herder.get_event(full_id(herder, EVENT, event_id))
    if as_json:
        print_json(event)
        return
    sender = None if event.sender_id is None else Text(event.sender_id)
    title = Text(f"event {event.id} ({event.name})", style="bold")
    pairs = [("source", Text(event.source)), ("sender id", sender)]
    out.print(record(title, [*pairs, ("received", when(event.received_at))]), highlight=False)
    out.print("payload:")
    out.print_json(json.dumps(event.payload))
    out.print("triggers:")
    print_outcomes(event.outcomes)
