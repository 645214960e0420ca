"""``herder hook …``: inbound webhooks (docs/events.md). ``create`` prints the URL to give
the sender and, when Herder made it, the signing secret — the only time it is ever shown;
``deliveries`` says what became of each request the hook received."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from herder.cli.answers import acted_on, print_listing
from herder.cli.common import JsonFlag, app, client, fail, out, print_json, when
from herder.cli.ids import HOOK, QuietFlag, full_id, id_table, short_ids
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.hooks import Hook, HookScheme

hook_app = typer.Typer(
    help="Inbound webhooks: URLs whose signed deliveries become events.", no_args_is_help=True
)
app.add_typer(hook_app, name="hook")

STDIN = Path("-")
Scheme = Annotated[
    HookScheme | None, typer.Option(help="how senders sign: Herder's, GitHub's or Stripe's way")
]
Event = Annotated[
    str | None,
    typer.Option(help="its events' name (default: the hook's), the delivery's kind appended"),
]
Rate = Annotated[
    float | None, typer.Option("--rate", help="deliveries a second it takes (per API process)")
]
Burst = Annotated[int | None, typer.Option(help="deliveries it takes at once above the rate")]
Enabled = Annotated[
    bool | None, typer.Option("--enable/--disable", help="a disabled hook refuses deliveries")
]


def _secret(secret: str | None, secret_file: Path | None) -> str | None:
    """The secret the sender already holds (Stripe's ``whsec_…``), if one is given: a file's
    first line, or standard input's (``-``)."""
    if secret is not None and secret_file is not None:
        raise fail("--secret and --secret-file: choose one")
    if secret_file is None:
        return secret
    try:
        text = sys.stdin.read() if secret_file == STDIN else secret_file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise fail(f"cannot read {secret_file}: {error}") from error
    return text.strip()


def _fields(
    scheme: HookScheme | None,
    event: str | None,
    rate: float | None,
    burst: int | None,
    enabled: bool | None,
) -> dict[str, Any]:
    given = {"scheme": scheme, "event": event, "rate_per_second": rate, "burst": burst,
             "enabled": enabled}  # fmt: skip
    return {key: value for key, value in given.items() if value is not None}


def _table(herder: HerderClient, hooks: list[Hook], *, whole_ids: bool = False) -> Listing:
    """Hooks; at 80 columns whether enabled, the scheme and the rate give way, in that
    order, and the URL is cut (``hook show`` has it whole)."""
    table, shown = id_table(
        (hook.id for hook in hooks), "NAME", Field("SCHEME", drop=2), "EVENT",
        Field("RATE", drop=3), Field("ENABLED", drop=1), Field("URL", free=True),
        whole_ids=whole_ids,
    )  # fmt: skip
    for hook in hooks:
        table.add_row(
            shown[hook.id], hook.name, hook.scheme.value, hook.event,
            f"{hook.rate_per_second:g}/s, burst {hook.burst}", "yes" if hook.enabled else "no",
            herder.hook_url(hook),
        )  # fmt: skip
    return table


@hook_app.command("create")
def hook_create(
    name: str,
    scheme: Scheme = None,
    event: Event = None,
    secret: Annotated[
        str | None,
        typer.Option(help="the sender's secret (shows in ps and shell history: prefer a file)"),
    ] = None,
    secret_file: Annotated[
        Path | None, typer.Option(help="read the sender's secret from this file ('-': stdin)")
    ] = None,
    rate: Rate = None,
    burst: Burst = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a hook: prints the URL to give the sender and, unless you gave one, the new
    signing secret — shown this once only."""
    given = _secret(secret, secret_file)
    with client() as herder:
        created = herder.create_hook(name, _fields(scheme, event, rate, burst, None), secret=given)
        url = herder.hook_url(created)
    if as_json:
        print_json(created)
        return
    out.print(f"created hook [bold]{created.name}[/] ({created.id})")
    out.print(f"URL:    {url}", highlight=False)
    if given is not None:
        out.print("secret: the one you gave")
        return
    out.print(f"secret: {created.secret}", highlight=False, markup=False)
    out.print(
        "This secret will not be shown again: give it and the URL to the sender now "
        "(lost: herder hook rotate)."
    )


@hook_app.command("rotate")
def hook_rotate(
    hook: str,
    secret_file: Annotated[
        Path | None, typer.Option(help="the sender's new secret, from this file ('-': stdin)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Give a hook a new signing secret (the URL stays): prints it once, unless you gave it.
    Deliveries signed with the old one are refused from then on."""
    given = _secret(None, secret_file)
    with client() as herder:
        rotated = herder.rotate_hook_secret(full_id(herder, HOOK, hook), secret=given)
    if as_json:
        print_json(rotated)
        return
    out.print(f"hook [bold]{rotated.name}[/] has a new secret; its URL is unchanged")
    if given is None:
        out.print(f"secret: {rotated.secret}", highlight=False, markup=False)
        out.print("This secret will not be shown again: give it to the sender now.")


@hook_app.command("list")
def hook_list(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="how many")] = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Your tenant's hooks and their URLs (never a secret)."""
    with client() as herder:
        page = herder.list_hooks(limit=limit)
        print_listing(page, lambda items: _table(herder, items), as_json=as_json, quiet=quiet)


@hook_app.command("show")
def hook_show(hook: str, as_json: JsonFlag = False) -> None:
    """A hook, by name, id or the start of its id, and its URL (its secret is never shown
    again)."""
    with client() as herder:
        found = herder.get_hook(full_id(herder, HOOK, hook))
        if as_json:
            print_json(found)
        else:
            title = Text(f"hook {found.name}", style="bold")
            out.print(record_of(title, _table(herder, [found], whole_ids=True)))


@hook_app.command("update")
def hook_update(
    hook: str,
    scheme: Scheme = None,
    event: Event = None,
    rate: Rate = None,
    burst: Burst = None,
    enabled: Enabled = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a hook: what is not given stays. A new secret: herder hook rotate."""
    changes = _fields(scheme, event, rate, burst, enabled)
    if not changes:
        raise fail(
            "nothing to change: give --scheme, --event, --rate, --burst, --enable or --disable"
        )
    with client() as herder:
        changed = herder.update_hook(full_id(herder, HOOK, hook), changes)
        if as_json:
            print_json(changed)
        else:
            out.print(_table(herder, [changed], whole_ids=True))


@hook_app.command("delete")
def hook_delete(hook: str) -> None:
    """Delete a hook: its URL answers 404 from then on."""
    hook, _ = acted_on(HOOK, hook, HerderClient.delete_hook)
    out.print(f"deleted hook {hook}")


@hook_app.command("deliveries")
def hook_deliveries(
    hook: str,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="how many, newest first")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """The requests the hook received (past its rate), newest first: accepted, a duplicate
    (a sender's retry, which started nothing), or rejected and why."""
    with client() as herder:
        page = herder.hook_deliveries(full_id(herder, HOOK, hook), limit=limit)
    if as_json:
        print_json(page)
        return
    events = short_ids(delivery.event_id for delivery in page.items if delivery.event_id)
    table = Listing(
        "RECEIVED",
        Field("DELIVERY ID", drop=2),
        "STATUS",
        Field("HTTP", drop=1),
        Field("REASON", free=True),
        "EVENT",
    )
    for delivery in page.items:
        table.add_row(
            when(delivery.received_at), escape(delivery.delivery_id or ""),
            delivery.status.value, str(delivery.http_status), escape(delivery.reason or ""),
            events.get(delivery.event_id or "", ""),
        )  # fmt: skip
    out.print(table)
