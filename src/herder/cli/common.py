"""What every ``herder`` command shares: the root app, output, and the client it talks with."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from pydantic import BaseModel
from rich.console import Console

from herder.cli.help import CommandsByUse
from herder.client import HerderClient
from herder.client.errors import ApiError
from herder.client.retries import BUDGET_SECONDS, Retries, RetryNotice
from herder.credentials import find_credentials, searched_places
from herder.domain.models import Page
from herder.tls import TlsError

T = TypeVar("T")
PAGE = 1000  # items a listing asks for at once when it reads them all

app = typer.Typer(
    cls=CommandsByUse,
    help="Herder: run uploaded programs once, on a schedule or as DAG steps, on a fleet.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

LOG_FORMAT = "%(asctime)s {role} %(levelname)s %(message)s"
out = Console()
err = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]
HomeOption = Annotated[
    Path | None, typer.Option("--home", help="data directory (default $HERDER_HOME or ./.herder)")
]


def fail(message: str, *, code: int = 1) -> typer.Exit:
    """The error on one line of stderr however long (the terminal wraps it, not Rich), as
    docs/configuration.md promises scripts."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def client(retry_seconds: float | None = None) -> HerderClient:
    """A client of the server the variables or the nearest client file name
    (``credentials.py``); one line naming where it looked when there is none.
    ``retry_seconds``: how long a call is tried again, when not ``HERDER_RETRY_SECONDS``."""
    cwd = Path.cwd()
    try:
        found = find_credentials(os.environ, cwd)
    except (ValueError, SystemExit) as error:
        raise fail(str(error.code if isinstance(error, SystemExit) else error)) from None
    for corrected in found.corrected:
        err.print(f"made private: {corrected}", highlight=False, markup=False, soft_wrap=True)
    if found.credentials is None:
        raise fail(
            "no server configured: run 'herder up', set HERDER_URL and HERDER_API_KEY, or set "
            f"HERDER_HOME to the directory holding client.json (looked for "
            f"{searched_places(os.environ, cwd)})"
        )
    budget = retry_budget(os.environ) if retry_seconds is None else retry_seconds
    retries = Retries(budget, on_retry=_say_once_it_retries())
    credentials = found.credentials
    ca_file = Path(credentials.ca_file) if credentials.ca_file else None
    try:
        return HerderClient(credentials.url, credentials.api_key, retries=retries, ca_file=ca_file)
    except TlsError as error:
        raise fail(str(error)) from None


def retry_budget(environ: Mapping[str, str]) -> float:
    """``HERDER_RETRY_SECONDS``: how long a call safe to repeat is tried again while the
    server is lost for a moment (30 s; 0 never)."""
    given = environ.get("HERDER_RETRY_SECONDS")
    if given is None:
        return BUDGET_SECONDS
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise fail(f"HERDER_RETRY_SECONDS must be seconds from 0 to 3600, not {given!r}")
    return seconds


def _say_once_it_retries() -> RetryNotice:
    """A line on stderr the first time a call is tried again, so a wait is not silent."""
    said = False

    def notice(failure: ApiError | httpx.TransportError, pause: float) -> None:
        nonlocal said
        if not said:
            said = True
            err.print(
                f"the server is unavailable for now ({failure}); trying again "
                f"(HERDER_RETRY_SECONDS bounds it)",
                style="dim", highlight=False, markup=False, soft_wrap=True,
            )  # fmt: skip

    return notice


def new_idempotency_key() -> str:
    """A new key for a submission: tried again after a lost answer, it starts no second run."""
    return f"cli-{uuid.uuid4().hex}"


def print_json(value: BaseModel | list[BaseModel]) -> None:
    if isinstance(value, list):
        out.print_json(json.dumps([item.model_dump(mode="json") for item in value]))
    else:
        out.print_json(value.model_dump_json())


def every(listing: Callable[..., Page[T]]) -> Iterator[T]:
    """Every item of a paged listing (``limit`` and ``cursor`` keywords), page by page."""
    cursor = None
    while True:
        page = listing(limit=PAGE, cursor=cursor)
        yield from page.items
        if (cursor := page.next_cursor) is None:
            return


def pairs(items: list[str], what: str) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise fail(f"{what} {item!r} must look like KEY=VALUE")
        result[key] = value
    return result


def json_pairs(items: list[str], what: str) -> dict[str, Any]:
    """KEY=VALUE, the value as JSON when it reads as JSON (1, true, ["a"]), else a string."""
    values: dict[str, Any] = {}
    for key, raw in pairs(items, what).items():
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return values


def iso_moment(text: str, option: str, problem: str) -> datetime:
    """``text`` as an ISO 8601 time with an offset; else fail naming ``option`` and the text,
    then ``problem`` (how a bad one is refused)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise fail(f"{option} {text!r}{problem}") from error
    if moment.tzinfo is None:
        raise fail(f"{option} {text!r} needs an offset, e.g. {text}Z")
    return moment


def when(moment: object) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if hasattr(moment, "strftime") else "-"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def seconds_in(text: str, option: str = "--in") -> int:
    """``90s``, ``10m``, ``2h``, ``1d`` (or plain seconds) as seconds."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        return int(number) * _UNITS[unit]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give 90s, 10m, 2h or 1d", param_hint=option) from None
