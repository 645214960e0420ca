"""``herder key …``: a tenant's API keys — list, create (the token is shown once), revoke."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from herder.cli.answers import print_listing
from herder.cli.common import JsonFlag, app, client, iso_moment, out, print_json, when
from herder.cli.ids import API_KEY, QuietFlag, full_id, id_table, tenant_of
from herder.cli.views import Field, Listing
from herder.domain.models import ApiKey

key_app = typer.Typer(help="API keys: list, create, revoke.", no_args_is_help=True)
app.add_typer(key_app, name="key")

_DURATION = re.compile(r"^(\d{1,6})([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
TenantOption = Annotated[
    str | None, typer.Option("--tenant", help="another tenant's, by name or id (system admins)")
]


def moment(text: str, option: str, *, now: datetime, ahead: bool) -> datetime:
    """ISO 8601 with an offset, or a duration (``30m``, ``12h``, ``90d``, ``2w``) after
    ``now`` when ``ahead``, else before it."""
    if matched := _DURATION.match(text):
        span = timedelta(**{_UNITS[matched[2]]: int(matched[1])})
        return now + span if ahead else now - span
    return iso_moment(text, option, ": give 30m, 12h, 90d, 2w or an ISO 8601 time")


def state(key: ApiKey, now: datetime) -> str:
    if key.revoked_at is not None:
        return f"revoked {when(key.revoked_at)}"
    if key.expires_at is not None and key.expires_at <= now:
        return "expired"
    return "live"


def _key_table(keys: list[ApiKey]) -> Listing:
    """Keys; at 80 columns the last use, the creation and the expiry give way, in that
    order."""
    now = datetime.now(UTC)
    table, shown = id_table(
        (key.id for key in keys),
        "NAME",
        "ROLE",
        Field("CREATED", drop=2),
        Field("EXPIRES", drop=1),
        Field("LAST USED", drop=3),
        "STATE",
    )
    for key in keys:
        table.add_row(
            shown[key.id], key.name, key.role, when(key.created_at), when(key.expires_at),
            when(key.last_used_at), state(key, now),
        )  # fmt: skip
    return table


@key_app.command("list")
def key_list(
    tenant: TenantOption = None,
    limit: int = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List the tenant's keys, newest first (revoked and expired ones too; never secrets)."""
    with client() as herder:
        tenant_id = tenant_of(herder, tenant).id if tenant else None
        page = herder.list_keys(tenant_id=tenant_id, limit=limit)
    print_listing(page, _key_table, as_json=as_json, quiet=quiet)


@key_app.command("create")
def key_create(
    name: str,
    role: Annotated[str, typer.Option(help="admin, developer, operator or viewer")] = "developer",
    expires_in: Annotated[
        str | None, typer.Option(help="30m, 12h, 90d, 2w or an ISO 8601 time (default: never)")
    ] = None,
    tenant: TenantOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a key; its token is printed once and stored nowhere."""
    now = datetime.now(UTC)
    expires_at = moment(expires_in, "--expires-in", now=now, ahead=True) if expires_in else None
    with client() as herder:
        tenant_id = tenant_of(herder, tenant).id if tenant else None
        created = herder.create_key(
            role=role, name=name, expires_at=expires_at, tenant_id=tenant_id
        )
    if as_json:
        print_json(created)
        return
    expiry = f", expires {when(created.expires_at)} UTC" if created.expires_at else ""
    out.print(f"created {created.role} key [bold]{created.name}[/] ({created.id}{expiry})")
    out.print("token (shown once, keep it secret):", highlight=False)
    out.print(created.token, highlight=False, soft_wrap=True)


@key_app.command("revoke")
def key_revoke(key_id: str, as_json: JsonFlag = False) -> None:
    """Revoke a key (by id or the start of its id): refused at once by this server, within
    5 s by every other."""
    with client() as herder:
        revoked = herder.revoke_key(full_id(herder, API_KEY, key_id))
    if as_json:
        print_json(revoked)
    else:
        out.print(
            f"revoked key [bold]{revoked.name}[/] ({revoked.id}) at {when(revoked.revoked_at)}"
        )
