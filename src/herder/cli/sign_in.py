"""``herder login``, ``herder logout``, ``herder whoami``: a person's own session on a
server that signs people in through an OpenID provider (docs/tenants.md "Single sign-on").
The session's token is saved 0600 (``credentials.session_path``) and used when no
``HERDER_API_KEY`` is set; API keys stay for machines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import httpx
import typer

from herder.cli.common import app, client, err, fail, out
from herder.client.sign_in import DeviceCode, SignInFailed, sign_in
from herder.credentials import (
    SavedSession,
    find_credentials,
    save_session,
    saved_session,
    session_path,
)
from herder.tls import client_context

TIMEOUT_SECONDS = 30.0


def _server_url(given: str | None) -> tuple[str, str | None]:
    """The server to sign in at: ``--url``, else where the CLI would send its calls."""
    ca_file = os.environ.get("HERDER_CA_FILE") or None
    if given:
        return given.rstrip("/"), ca_file
    try:
        found = find_credentials({**os.environ, "HERDER_API_KEY": ""}, Path.cwd())
    except (ValueError, SystemExit) as error:
        raise fail(str(error)) from None
    url = os.environ.get("HERDER_URL") or (found.credentials.url if found.credentials else None)
    if not url:
        raise fail("which server? set HERDER_URL or pass --url")
    return url.rstrip("/"), ca_file or (found.credentials.ca_file if found.credentials else None)


def _show(code: DeviceCode) -> None:
    err.print(
        f"Open {code.verification_uri_complete or code.verification_uri} and enter the code "
        f"{code.user_code}; waiting for you to approve it…",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@app.command()
def login(
    url: Annotated[
        str | None, typer.Option("--url", help="the server (default: HERDER_URL)")
    ] = None,
) -> None:
    """Sign in as yourself through the server's OpenID provider (the device flow: open the
    address shown, enter the code); the session is saved for the commands that follow."""
    server, ca_file = _server_url(url)
    verify = True if ca_file is None else client_context(Path(ca_file))
    try:
        with httpx.Client(base_url=server, timeout=TIMEOUT_SECONDS, verify=verify) as http:
            session = sign_in(http, show=_show)
    except SignInFailed as error:
        raise fail(str(error)) from None
    except httpx.HTTPError as error:
        raise fail(f"cannot reach {server}: {error}") from None
    path = save_session(os.environ, SavedSession(server, session.token, session.user_name, ca_file))
    out.print(
        f"signed in as {session.user_name} ({session.role} of {session.tenant_id}) until "
        f"{session.expires_at}; saved in {path}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@app.command()
def logout() -> None:
    """End your session on the server and forget it here."""
    saved = saved_session(os.environ)
    if saved is None:
        out.print("not signed in")
        return
    verify = True if saved.ca_file is None else client_context(Path(saved.ca_file))
    try:
        with httpx.Client(base_url=saved.url, timeout=TIMEOUT_SECONDS, verify=verify) as http:
            http.post("/auth/logout", headers={"Authorization": f"Bearer {saved.token}"})
    except httpx.HTTPError as error:
        err.print(f"could not reach {saved.url} ({error}); forgetting the session here")
    session_path(os.environ).unlink(missing_ok=True)
    out.print(f"signed out {saved.user_name}".strip(), highlight=False, markup=False)


@app.command()
def whoami() -> None:
    """Who the CLI acts as: your signed-in name, or the API key's name; tenant and role."""
    with client() as herder:
        caller = herder.whoami()
    who = caller.get("user_name") or "?"
    out.print(
        f"{who} ({caller['role']} of {caller['tenant_id']}; session or key {caller['session_id']})",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
