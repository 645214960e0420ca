"""How a command answers: JSON for scripts (``--json``), whole ids one a line for pipes
(``-q``), else a table or a line for people — one shape for every kind's listings, creations
and actions on one item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from herder.cli.common import client, out
from herder.cli.ids import IdKind, full_id, quiet_ids
from herder.client import HerderClient
from herder.domain.models import Page


class Record(Protocol):
    """An item as the API answers it: a model with an id."""

    @property
    def id(self) -> str: ...

    def model_dump_json(self) -> str: ...


class NamedRecord(Record, Protocol):
    @property
    def name(self) -> str: ...


Item = TypeVar("Item", bound=Record)
Made = TypeVar("Made", bound=NamedRecord)
Answer = TypeVar("Answer")


def print_listing(
    page: Page[Item], table: Callable[[list[Item]], Any], *, as_json: bool, quiet: bool
) -> None:
    """A listing's page: as JSON, as its items' whole ids, or as ``table`` draws them."""
    if as_json:
        out.print_json(page.model_dump_json())
    elif quiet:
        quiet_ids(item.id for item in page.items)
    else:
        out.print(table(page.items))


def listed(listing: Callable[..., Page[Item]], **query: Any) -> Page[Item]:
    """The page ``listing`` (a ``HerderClient`` method) answers ``query`` with."""
    with client() as herder:
        return listing(herder, **query)


def print_created(created: Made, noun: str, *, as_json: bool, quiet: bool, more: str = "") -> None:
    """What a create made: as JSON, as its whole id, or ``created <noun> <name> (<id>)``."""
    if as_json:
        out.print_json(created.model_dump_json())
    elif quiet:
        quiet_ids([created.id])
    else:
        out.print(f"created {noun} [bold]{created.name}[/] ({created.id}){more}")


def acted_on(
    kind: IdKind, given: str, act: Callable[[HerderClient, str], Answer]
) -> tuple[str, Answer]:
    """Find the item ``given`` names (``ids.full_id``) and ``act`` on it: its whole id, and
    what ``act`` answered."""
    with client() as herder:
        found = full_id(herder, kind, given)
        return found, act(herder, found)


def delete_named(
    find: Callable[[HerderClient, str], NamedRecord],
    delete: Callable[[HerderClient, str], object],
    given: str,
    noun: str,
) -> None:
    """Delete the item ``find`` finds by ``given``; say which, by name and id."""
    with client() as herder:
        found = find(herder, given)
        delete(herder, found.id)
    out.print(f"deleted {noun} {found.name} ({found.id})")


def act_on(
    kind: IdKind,
    given: str,
    act: Callable[[HerderClient, str], Item],
    said: Callable[[Item], str],
    *,
    as_json: bool,
) -> Item:
    """Find the item ``given`` names (``ids.full_id``), ``act`` on it and print what it is
    now: as JSON, or the line ``said`` makes of it. What ``act`` answered."""
    _, done = acted_on(kind, given, act)
    if as_json:
        out.print_json(done.model_dump_json())
    else:
        out.print(said(done))
    return done
