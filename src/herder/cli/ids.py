"""Ids as people read and type them: a table shows each id as its shortest unique start, as
git abbreviates hashes, and every command that takes an id takes such a start back.

One rule for every kind: a start names an id once it has ``MIN_PREFIX_CHARACTERS`` after the
kind's ``sch_``, ``wfrun_``… — the creation time to about a second — and only one item has
it. Tables never show less, so what a table shows can always be typed back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Column

from herder.cli.common import fail
from herder.client import HerderClient
from herder.domain.models import Job, Page
from herder.domain.workflows.models import Workflow

MIN_PREFIX_CHARACTERS = 8  # after the kind's prefix: they pin the creation time to about a second
ID_CHARACTERS = 26  # after the kind's prefix: 10 of milliseconds, 16 random (domain/ids.py)
CANDIDATES_SHOWN = 5  # ids an ambiguous start lists
_ID = re.compile(rf"[a-z]+_[0-9A-Z]{{{ID_CHARACTERS}}}")
# The start of an id, in the Crockford base32 ids are made of, short of a whole id; anything
# else (a whole id, a name) goes to the server as it is.
_START = re.compile(rf"[0-9A-HJKMNP-TV-Z]{{1,{ID_CHARACTERS - 1}}}")

QuietFlag = Annotated[
    bool, typer.Option("--quiet", "-q", help="print only whole ids, one a line, for pipes")
]


@dataclass(frozen=True)
class IdKind:
    """A kind of id: its prefix, its noun in messages, and its listing, which must take
    ``id_prefix`` and ``limit``."""

    prefix: str
    noun: str
    listing: Callable[[HerderClient], Callable[..., Page[Any]]]
    named: bool = False  # a start no id has goes to the server as a name ("job_batch")

    def starting(self, herder: HerderClient, start: str, most: int) -> list[str]:
        """Up to ``most`` ids of this kind that begin with ``start``, newest first."""
        return [item.id for item in self.listing(herder)(id_prefix=start, limit=most).items]


JOB = IdKind("job", "job", lambda herder: herder.list_jobs, named=True)
RUN = IdKind("run", "run", lambda herder: herder.list_runs)
SCHEDULE = IdKind("sch", "schedule", lambda herder: herder.list_schedules)
WORKFLOW = IdKind("wf", "workflow", lambda herder: herder.list_workflows, named=True)
WORKFLOW_RUN = IdKind("wfrun", "workflow run", lambda herder: herder.list_workflow_runs)
ALERT_CHANNEL = IdKind("ach", "alert channel", lambda herder: herder.list_alert_channels)
ALERT_RULE = IdKind("alr", "alert rule", lambda herder: herder.list_alert_rules)


def full_id(herder: HerderClient, kind: IdKind, given: str) -> str:
    """The id ``given`` names: a whole id or a name as it is, else the one id of ``kind``
    that starts with it (a cell copied with a trailing ``…`` too)."""
    head = f"{kind.prefix}_"
    start = head + given.removesuffix("…").removeprefix(head).upper()
    if not given.startswith(head) or not _START.fullmatch(start[len(head) :]):
        return given
    too_short = len(start) - len(head) < MIN_PREFIX_CHARACTERS
    found = [] if too_short else kind.starting(herder, start, CANDIDATES_SHOWN + 1)
    if kind.named and not found:
        return given
    if too_short:
        raise fail(
            f"no {kind.noun} {given}: give {MIN_PREFIX_CHARACTERS} characters after {head} or more"
        )
    if not found:
        raise fail(f"no {kind.noun} starts with {start}")
    if len(found) > 1:
        more = ", …" if len(found) > CANDIDATES_SHOWN else ""
        candidates = ", ".join(found[:CANDIDATES_SHOWN]) + more
        raise fail(f"{start} is ambiguous: {candidates} (give more characters)")
    return found[0]


def job_of(herder: HerderClient, given: str) -> Job:
    """The job ``given`` names: by name, whole id or a start of its id."""
    return herder.find_job(full_id(herder, JOB, given))


def workflow_of(herder: HerderClient, given: str) -> Workflow:
    """The workflow ``given`` names: by name, whole id or a start of its id."""
    return herder.find_workflow(full_id(herder, WORKFLOW, given))


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


def id_column(header: str, shown: Collection[str]) -> Column:
    """A column as wide as the ids it shows, never cut or wrapped: the other columns give."""
    return Column(header, no_wrap=True, min_width=max(map(len, shown), default=len(header)))


def quiet_ids(ids: Iterable[str]) -> None:
    """``-q``: whole ids only, one a line, for ``xargs`` and ``$(…)``."""
    for identifier in ids:
        typer.echo(identifier)
