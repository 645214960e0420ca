"""``herder alert …``: channels (webhooks, email, Slack), the rules that alert through them,
the incidents they opened and the deliveries made."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Protocol, TypeVar

import typer

from herder.cli.answers import acted_on
from herder.cli.common import JsonFlag, app, client, json_pairs, out, print_json, when
from herder.cli.ids import (
    ALERT_CHANNEL,
    ALERT_RULE,
    JOB,
    SCHEDULE,
    WORKFLOW,
    QuietFlag,
    full_id,
    job_of,
    names_of,
    quiet_ids,
    short_ids,
    workflow_of,
)
from herder.cli.views import Field, Listing
from herder.client import HerderClient
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.rules import Channel, Delivery, Incident, Rule, RuleKind
from herder.domain.models import Page


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Identified)
Row = tuple[str, ...]

alert_app = typer.Typer(
    help="Alerts: channels, rules, incidents and deliveries.", no_args_is_help=True
)
channel_app = typer.Typer(
    help="Channels: signed webhooks, email (through the cell's SMTP relay) and Slack.",
    no_args_is_help=True,
)
rule_app = typer.Typer(help="Rules: what opens an incident.", no_args_is_help=True)
alert_app.add_typer(channel_app, name="channel")
alert_app.add_typer(rule_app, name="rule")
app.add_typer(alert_app, name="alert")


def show(
    page: Page[T],
    as_json: bool,
    columns: tuple[str | Field, ...],
    row: Callable[[T], Row],
    *,
    quiet: bool = False,
) -> None:
    """The page as JSON, its ids (``quiet``), or its items as a listing, a row each after the
    item's id as its shortest unique start."""
    if as_json:
        print_json(page)
        return
    if quiet:
        quiet_ids(one.id for one in page.items)
        return
    shown = short_ids(one.id for one in page.items)
    table = Listing("ID", *columns)
    for one in page.items:
        table.add_row(shown[one.id], *row(one))
    out.print(table)


def _channel_row(one: Channel) -> Row:
    return (one.name, one.kind, one.url, "yes" if one.enabled else "no", when(one.created_at))


_NAMED_PARAMS = {"job_id": JOB, "schedule_id": SCHEDULE, "workflow_id": WORKFLOW}


def _param_names(herder: HerderClient, rules: list[Rule]) -> dict[str, str]:
    """The names of the jobs, schedules and workflows the rules' params name."""
    names: dict[str, str] = {}
    for param, kind in _NAMED_PARAMS.items():
        ids = {str(rule.params[param]) for rule in rules if rule.params.get(param)}
        names |= names_of(herder, kind, ids)
    return names


def _rule_row(channels: dict[str, str], named_params: dict[str, str]) -> Callable[[Rule], Row]:
    def row(one: Rule) -> Row:
        shown = {
            key: named_params.get(str(value), value) if key in _NAMED_PARAMS else value
            for key, value in one.params.items()
            if value is not None
        }
        named = (channels.get(channel_id, channel_id) for channel_id in one.channel_ids)
        return (one.name, one.kind, json.dumps(shown), ", ".join(named),
                "yes" if one.enabled else "no")  # fmt: skip

    return row


def _incident_row(rules: dict[str, str], keys: dict[str, str]) -> Callable[[Incident], Row]:
    def row(one: Incident) -> Row:
        return (rules.get(one.rule_id, one.rule_id), keys[one.key], one.state, when(one.opened_at),
                when(one.resolved_at), one.summary)  # fmt: skip

    return row


def _delivery_row(channels: dict[str, str]) -> Callable[[Delivery], Row]:
    def row(one: Delivery) -> Row:
        last = str(one.last_status or one.last_error or "-")
        return (channels.get(one.channel_id, one.channel_id), one.event, one.state,
                str(one.attempts), last, when(one.next_attempt_at))  # fmt: skip

    return row


Limit = Annotated[int, typer.Option(min=1, max=1000, help="how many, newest first")]


KindOption = Annotated[
    ChannelKind,
    typer.Option(
        "--kind",
        help="webhook (URL: where to POST), email (URL: mailto:a@example.com,b@example.com) "
        "or slack (URL: the incoming webhook's https://hooks.slack.com/…)",
    ),
]


@channel_app.command("create")
def channel_create(
    name: str, url: str, kind: KindOption = ChannelKind.WEBHOOK, as_json: JsonFlag = False
) -> None:
    """Create a channel; a webhook's signing secret is printed this once only."""
    with client() as herder:
        channel = herder.create_alert_channel(name, url, kind=kind.value)
    if as_json:
        print_json(channel)
        return
    out.print(
        f"created {kind.value} alert channel {channel.id} ({channel.name}) sending to "
        f"{channel.url}",
        highlight=False,
    )
    if channel.secret is not None:
        out.print(f"signing secret (shown once, keep it): {channel.secret}", highlight=False)


@channel_app.command("list")
def channel_list(limit: Limit = 100, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    with client() as herder:
        page = herder.list_alert_channels(limit=limit)

    columns = ("NAME", "KIND", Field("URL", free=True), "ENABLED", Field("CREATED", drop=1))
    show(page, as_json, columns, _channel_row, quiet=quiet)


@channel_app.command("delete")
def channel_delete(channel: str) -> None:
    """Delete a channel (by name, id or the start of its id) and its deliveries; rules stop
    naming it."""
    channel_id, _ = acted_on(ALERT_CHANNEL, channel, HerderClient.delete_alert_channel)
    out.print(f"deleted alert channel {channel_id}")


@channel_app.command("test")
def channel_test(channel: str) -> None:
    """Queue a test delivery (signed, for a webhook); see it with 'herder alert deliveries'."""
    _, delivery_id = acted_on(ALERT_CHANNEL, channel, HerderClient.test_alert_channel)
    out.print(f"queued test delivery {delivery_id}")


def _named_params(herder: HerderClient, params: dict[str, Any]) -> dict[str, Any]:
    """The rule's params with the job, schedule or workflow each names by its id."""
    named = dict(params)
    if isinstance(params.get("job_id"), str):
        named["job_id"] = job_of(herder, params["job_id"]).id
    if isinstance(params.get("schedule_id"), str):
        named["schedule_id"] = full_id(herder, SCHEDULE, params["schedule_id"])
    if isinstance(params.get("workflow_id"), str):
        named["workflow_id"] = workflow_of(herder, params["workflow_id"]).id
    return named


@rule_app.command("create")
def rule_create(
    name: str,
    kind: Annotated[str, typer.Option(help=f"one of: {', '.join(RuleKind)}")],
    channel: Annotated[
        list[str], typer.Option(help="a channel's name, id or its start (repeat for more)")
    ],
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=VALUE, e.g. job_id=nightly (a name, id or its start), consecutive=3"
        ),
    ] = None,
    recovery: Annotated[bool, typer.Option(help="a notice when an incident resolves")] = True,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a rule; it is checked whole, each field at fault named."""
    params = json_pairs(param or [], "--param")
    with client() as herder:
        channel_ids = [full_id(herder, ALERT_CHANNEL, one) for one in channel]
        body = {"name": name, "kind": kind, "channel_ids": channel_ids,
                "params": _named_params(herder, params), "notify_recovery": recovery}  # fmt: skip
        rule = herder.create_alert_rule(body)
    if as_json:
        print_json(rule)
        return
    if quiet:
        quiet_ids([rule.id])
        return
    out.print(f"created alert rule {rule.id} ({rule.name}, {rule.kind})")


@rule_app.command("list")
def rule_list(limit: Limit = 100, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    with client() as herder:
        page = herder.list_alert_rules(limit=limit)
        channels = names_of(
            herder, ALERT_CHANNEL, (c for one in page.items for c in one.channel_ids)
        )
        named_params = _param_names(herder, page.items)

    columns = ("NAME", "KIND", Field("PARAMS", free=True), "CHANNELS", Field("ENABLED", drop=1))
    show(page, as_json, columns, _rule_row(channels, named_params), quiet=quiet)


@rule_app.command("delete")
def rule_delete(rule: str) -> None:
    """Delete a rule (by name, id or the start of its id) and its incidents."""
    rule_id, _ = acted_on(ALERT_RULE, rule, HerderClient.delete_alert_rule)
    out.print(f"deleted alert rule {rule_id}")


@alert_app.command("list")
def alert_list(
    state: Annotated[str | None, typer.Option(help="open or resolved")] = None,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Incidents, newest first."""
    with client() as herder:
        page = herder.list_alerts(state=state, limit=limit)
        rules = names_of(herder, ALERT_RULE, (one.rule_id for one in page.items))
    keys = short_ids(one.key for one in page.items)  # a job's, schedule's, run's… id, or a name

    columns = (
        "RULE", Field("KEY", drop=2), "STATE", "OPENED", Field("RESOLVED", drop=1),
        Field("SUMMARY", free=True),
    )  # fmt: skip
    show(page, as_json, columns, _incident_row(rules, keys), quiet=quiet)


@alert_app.command("deliveries")
def alert_deliveries(
    channel: Annotated[str | None, typer.Option(help="only this channel's")] = None,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Deliveries, newest first, with their attempts."""
    with client() as herder:
        channel_id = None if channel is None else full_id(herder, ALERT_CHANNEL, channel)
        page = herder.list_alert_deliveries(channel_id=channel_id, limit=limit)
        channels = names_of(herder, ALERT_CHANNEL, (one.channel_id for one in page.items))

    columns = (
        "CHANNEL", "EVENT", "STATE", Field("ATTEMPTS", drop=2), Field("LAST", free=True),
        Field("NEXT", drop=1),
    )  # fmt: skip
    show(page, as_json, columns, _delivery_row(channels), quiet=quiet)
