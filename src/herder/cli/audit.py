"""``herder audit``: who changed what and when in the tenant, newest first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from herder.cli.common import JsonFlag, app, client, out, print_json, when
from herder.cli.ids import API_KEY, any_full_id, full_id, short_ids, tenant_of
from herder.cli.keys import TenantOption, moment
from herder.cli.views import Field, Listing
from herder.domain.audit import AuditEntry

Since = Annotated[str | None, typer.Option(help="1h, 7d, … ago, or an ISO 8601 time")]


def _audit_table(entries: list[AuditEntry]) -> Listing:
    """The entries, each caller by their name as it is now (a key's, a signed-in person's)
    and role (the ids: --json), each object by its shortest unique start; at 80 columns the
    role and the outcome give way, and the fields are cut."""
    objects = short_ids(entry.object_id for entry in entries if entry.object_id)
    table = Listing(
        "WHEN", "WHO", Field("ROLE", drop=2), "ACTION", "OBJECT", Field("FIELDS", free=True),
        Field("OUTCOME", drop=1),
    )  # fmt: skip
    for entry in entries:
        shown = objects[entry.object_id] if entry.object_id else entry.object_type
        table.add_row(
            when(entry.created_at), entry.actor_name or entry.key_name, entry.role,
            entry.action, shown, ", ".join(entry.fields),
            f"{entry.outcome} ({entry.status})",
        )  # fmt: skip
    return table


@app.command("audit")
def audit(
    since: Since = None,
    until: Since = None,
    object_type: Annotated[str | None, typer.Option("--type", help="e.g. jobs, keys")] = None,
    object_id: Annotated[
        str | None, typer.Option("--object", help="an object's id or its start")
    ] = None,
    key_id: Annotated[
        str | None, typer.Option("--key", help="calls made with this key (its id or start)")
    ] = None,
    tenant: TenantOption = None,
    limit: int = 100,
    as_json: JsonFlag = False,
) -> None:
    """The audit log: every change made through the API, newest first (tenant admins)."""
    now = datetime.now(UTC)
    with client() as herder:
        page = herder.audit(
            tenant_id=tenant_of(herder, tenant).id if tenant else None,
            since=moment(since, "--since", now=now, ahead=False) if since else None,
            until=moment(until, "--until", now=now, ahead=False) if until else None,
            object_type=object_type,
            object_id=any_full_id(herder, object_id) if object_id else None,
            key_id=full_id(herder, API_KEY, key_id) if key_id else None, limit=limit,
        )  # fmt: skip
    if as_json:
        print_json(page)
    else:
        out.print(_audit_table(page.items))
