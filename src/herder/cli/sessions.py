"""``herder session …``: the sessions of a tenant's signed-in people (docs/tenants.md "Single
sign-on"), for its admins — listed (live ones unless ``--all``; never a secret) and revoked,
as ``herder key`` does for API keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.text import Text

from herder.cli.answers import print_listing
from herder.cli.common import JsonFlag, app, client, out, print_json, when
from herder.cli.ids import IdKind, QuietFlag, full_id, id_table
from herder.cli.views import Field, Listing
from herder.client import HerderClient
from herder.domain.models import Page
from herder.domain.sign_in import Session

session_app = typer.Typer(
    help="People's sessions (signed in through the server's OpenID provider): list, revoke.",
    no_args_is_help=True,
)
app.add_typer(session_app, name="session")

SESSION = IdKind("ses", "session", lambda herder: herder.list_sessions)
PAGE_SIZE = 100  # sessions read a request while live ones are looked for among ended ones


def state(session: Session, now: datetime) -> str:
    if session.revoked_at is not None:
        return f"revoked {when(session.revoked_at)}"
    if session.expires_at <= now:
        return "expired"
    return "live"


def _session_table(sessions: list[Session]) -> Listing:
    """Sessions; at 80 columns the email, the creation and the state give way, in that
    order."""
    now = datetime.now(UTC)
    table, shown = id_table(
        (session.id for session in sessions),
        "PERSON",
        Field("EMAIL", drop=3),
        "ROLE",
        "KIND",
        Field("CREATED", drop=2),
        "EXPIRES",
        Field("STATE", drop=1),
    )
    for session in sessions:
        table.add_row(
            shown[session.id], Text(session.user_name), Text(session.email), session.role,
            session.kind, when(session.created_at), when(session.expires_at),
            state(session, now),
        )  # fmt: skip
    return table


def _live(herder: HerderClient, most: int) -> Page[Session]:
    """Up to ``most`` live sessions, newest first: the API lists ended ones too, so pages
    are read until enough are found or none is left."""
    now = datetime.now(UTC)
    found: list[Session] = []
    cursor = None
    while len(found) < most:
        page = herder.list_sessions(limit=PAGE_SIZE, cursor=cursor)
        found += [session for session in page.items if state(session, now) == "live"]
        cursor = page.next_cursor
        if cursor is None:
            break
    return Page(items=found[:most], next_cursor=None)


@session_app.command("list")
def session_list(
    show_all: Annotated[
        bool, typer.Option("--all", help="revoked and expired sessions too")
    ] = False,
    limit: int = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List the tenant's people's live sessions, newest first: who, their role, where they
    signed in (dashboard or cli), when, until when (a tenant admin's key or session)."""
    with client() as herder:
        page = herder.list_sessions(limit=limit) if show_all else _live(herder, limit)
    print_listing(page, _session_table, as_json=as_json, quiet=quiet)


@session_app.command("revoke")
def session_revoke(session_id: str, as_json: JsonFlag = False) -> None:
    """End a person's session (by id or the start of its id): they must sign in again;
    refused at once by this server, within 5 s by every other."""
    with client() as herder:
        revoked = herder.revoke_session(full_id(herder, SESSION, session_id))
    if as_json:
        print_json(revoked)
        return
    out.print(
        f"revoked the {revoked.kind} session {revoked.id} of {revoked.user_name} at "
        f"{when(revoked.revoked_at)}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
