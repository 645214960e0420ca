"""Ids as people read and type them: a table shows each id as its shortest unique start, as
git abbreviates hashes, and every command that takes an id takes such a start back.

One rule for every kind: a start names an id once it has ``MIN_PREFIX_CHARACTERS`` after the
kind's ``sch_``, ``wfrun_``… — the creation time to about a second — and only one item has
it. Tables never show less, so what a table shows can always be typed back. Where people
think in names (jobs, schedules, workflows, channels, rules, limits, triggers, hooks, pools,
tenants) a name is taken too, and tables show the names of what their rows refer to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from http import HTTPStatus
from typing import Annotated, Any

import typer

from herder.cli.common import fail
from herder.cli.views import Field, Listing
from herder.client import ApiError, HerderClient
from herder.domain.models import Job, Page, Tenant, Worker
from herder.domain.workflows.models import Workflow

MIN_PREFIX_CHARACTERS = 8  # after the kind's prefix: they pin the creation time to about a second
ID_CHARACTERS = 26  # after the kind's prefix: 10 of milliseconds, 16 random (domain/ids.py)
CANDIDATES_SHOWN = 5  # ids an ambiguous start lists
NAMES_PAGE = 1000  # the API's largest page: a table's names in as few requests as may be
_ID = re.compile(rf"[a-z]+_[0-9A-Z]{{{ID_CHARACTERS}}}")
# The start of an id, in the Crockford base32 ids are made of, short of a whole id; anything
# else (a whole id, a name) goes to the server as it is.
_START = re.compile(rf"[0-9A-HJKMNP-TV-Z]{{1,{ID_CHARACTERS - 1}}}")

QuietFlag = Annotated[
    bool, typer.Option("--quiet", "-q", help="print only whole ids, one a line, for pipes")
]


class Naming(Enum):
    """Where a kind's items are found by name, for the commands that take one."""

    NONE = "ids only"
    PASSED_ON = "the API (or the client's find_…) takes a name wherever it takes an id"
    LISTED = "the CLI finds the name with the listing's name="


@dataclass(frozen=True)
class IdKind:
    """A kind of id: its prefix, its noun in messages, its listing, which must take
    ``id_prefix`` and ``limit`` (and ``name`` for a ``LISTED`` kind), and how its items are
    named."""

    prefix: str
    noun: str
    listing: Callable[[HerderClient], Callable[..., Page[Any]]]
    naming: Naming = Naming.NONE

    def starting(self, herder: HerderClient, start: str, most: int) -> list[str]:
        """Up to ``most`` ids of this kind that begin with ``start``, newest first."""
        return [item.id for item in self.listing(herder)(id_prefix=start, limit=most).items]

    def named(self, herder: HerderClient, name: str) -> str | None:
        """The id of the item called ``name``, if one is; a name passed on is its own id."""
        if self.naming is Naming.NONE:
            return None
        if self.naming is Naming.PASSED_ON:
            return name
        found = self.listing(herder)(name=name, limit=1).items
        return found[0].id if found else None


def _workers(herder: HerderClient) -> Callable[..., Page[Worker]]:
    """The workers as a listing: the API lists them all at once."""

    def listing(*, id_prefix: str, limit: int) -> Page[Worker]:
        found = [worker for worker in herder.list_workers() if worker.id.startswith(id_prefix)]
        return Page(items=found[:limit], next_cursor=None)

    return listing


PASSED, LISTED = Naming.PASSED_ON, Naming.LISTED
JOB = IdKind("job", "job", lambda herder: herder.list_jobs, PASSED)
RUN = IdKind("run", "run", lambda herder: herder.list_runs)
SCHEDULE = IdKind("sch", "schedule", lambda herder: herder.list_schedules, LISTED)
WORKFLOW = IdKind("wf", "workflow", lambda herder: herder.list_workflows, PASSED)
WORKFLOW_RUN = IdKind("wfrun", "workflow run", lambda herder: herder.list_workflow_runs)
ALERT_CHANNEL = IdKind("ach", "alert channel", lambda herder: herder.list_alert_channels, LISTED)
ALERT_RULE = IdKind("alr", "alert rule", lambda herder: herder.list_alert_rules, LISTED)
LIMIT = IdKind("lim", "limit", lambda herder: herder.list_limits, PASSED)
TRIGGER = IdKind("trg", "trigger", lambda herder: herder.list_triggers, PASSED)
HOOK = IdKind("hook", "hook", lambda herder: herder.list_hooks, PASSED)
POOL = IdKind("pool", "pool", lambda herder: herder.list_pools, PASSED)
TENANT = IdKind("ten", "tenant", lambda herder: herder.list_tenants, PASSED)
EVENT = IdKind("evt", "event", lambda herder: herder.list_events)
API_KEY = IdKind("key", "API key", lambda herder: herder.list_keys)
WORKER = IdKind("wrk", "worker", _workers)
KINDS = {
    kind.prefix: kind
    for kind in (JOB, RUN, SCHEDULE, WORKFLOW, WORKFLOW_RUN, ALERT_CHANNEL, ALERT_RULE, LIMIT,
                 TRIGGER, HOOK, POOL, TENANT, EVENT, API_KEY, WORKER)
}  # fmt: skip


def full_id(herder: HerderClient, kind: IdKind, given: str) -> str:
    """The id ``given`` names: a whole id as it is; else the one id of ``kind`` that starts
    with it (a cell copied with a trailing ``…`` too); else, for a named kind, the item of
    that name, which may look like the start of an id."""
    head = f"{kind.prefix}_"
    start = head + given.removesuffix("…").removeprefix(head).upper()
    if _ID.fullmatch(given):
        return given
    if not (given.startswith(head) and _START.fullmatch(start[len(head) :])):
        named = kind.named(herder, given)
        if named is None and kind.naming is Naming.LISTED:
            raise fail(f"no {kind.noun} is named {given}")
        return named or given  # the API answers for what is neither
    too_short = len(start) - len(head) < MIN_PREFIX_CHARACTERS
    found = [] if too_short else kind.starting(herder, start, CANDIDATES_SHOWN + 1)
    if len(found) > 1:
        more = ", …" if len(found) > CANDIDATES_SHOWN else ""
        candidates = ", ".join(found[:CANDIDATES_SHOWN]) + more
        raise fail(f"{start} is ambiguous: {candidates} (give more characters)")
    named = found[0] if found else kind.named(herder, given)
    if named is not None:
        return named
    if too_short:
        raise fail(
            f"no {kind.noun} {given}: give {MIN_PREFIX_CHARACTERS} characters after {head} or more"
        )
    raise fail(f"no {kind.noun} starts with {start}")


def any_full_id(herder: HerderClient, given: str) -> str:
    """The id ``given`` names, of whichever kind its prefix says (``audit --object``); a
    prefix of no kind the CLI knows: as it is."""
    kind = KINDS.get(given.partition("_")[0])
    return given if kind is None else full_id(herder, kind, given)


def job_of(herder: HerderClient, given: str) -> Job:
    """The job ``given`` names: by name, whole id or a start of its id."""
    return herder.find_job(full_id(herder, JOB, given))


def tenant_of(herder: HerderClient, given: str) -> Tenant:
    """The tenant ``given`` names: by name, whole id or a start of its id."""
    return herder.find_tenant(full_id(herder, TENANT, given))


def workflow_of(herder: HerderClient, given: str) -> Workflow:
    """The workflow ``given`` names: by name, whole id or a start of its id."""
    return herder.find_workflow(full_id(herder, WORKFLOW, given))


def names_of(herder: HerderClient, kind: IdKind, ids: Iterable[str]) -> dict[str, str]:
    """The names of ``ids`` (id → name) for a table that shows names, read page by page
    from the kind's listing until all are found: a request a page, never one a row. None
    where the caller may not list them (a tenant's admin and the tenants): the ids show."""
    wanted, found, cursor = set(ids), dict[str, str](), None
    while wanted - found.keys():
        try:
            page = kind.listing(herder)(limit=NAMES_PAGE, cursor=cursor)
        except ApiError as error:
            if error.status != HTTPStatus.FORBIDDEN:
                raise
            return found
        found |= {item.id: item.name for item in page.items if item.id in wanted and item.name}
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return found


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id as its shortest start that no other of ``ids`` shares, with at least
    ``MIN_PREFIX_CHARACTERS`` after its prefix; anything not shaped as an id stays whole."""
    shown = {identifier: identifier for identifier in ids}
    ordered = sorted(identifier for identifier in shown if _ID.fullmatch(identifier))
    for index, identifier in enumerate(ordered):
        neighbours = ordered[max(index - 1, 0) : index] + ordered[index + 1 : index + 2]
        shared = max((_shared_length(identifier, other) for other in neighbours), default=0)
        least = identifier.index("_") + 1 + MIN_PREFIX_CHARACTERS
        shown[identifier] = identifier[: max(shared + 1, least)]
    return shown


def _shared_length(one: str, other: str) -> int:
    pairs = enumerate(zip(one, other, strict=False))
    return next((i for i, (a, b) in pairs if a != b), min(len(one), len(other)))


def quiet_ids(ids: Iterable[str]) -> None:
    """``-q``: whole ids only, one a line, for ``xargs`` and ``$(…)``."""
    for identifier in ids:
        typer.echo(identifier)


def id_table(
    ids: Iterable[str], *columns: str | Field, whole_ids: bool = False
) -> tuple[Listing, dict[str, str]]:
    """A listing led by an ID column that shows each of ``ids`` as its shortest unique start
    (``whole_ids``: as it is, for one item's view), and what it shows for each id."""
    listed = list(ids)
    shown = dict(zip(listed, listed, strict=True)) if whole_ids else short_ids(listed)
    return Listing("ID", *columns), shown
