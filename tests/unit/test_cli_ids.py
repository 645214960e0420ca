"""How tables abbreviate ids (the shortest start no other shown id shares, never shorter than
what the CLI takes back) and how a command reads the id, start or name it is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest
import typer

from herder.cli.ids import (
    MIN_PREFIX_CHARACTERS,
    IdKind,
    Naming,
    any_full_id,
    full_id,
    short_ids,
)
from herder.client import HerderClient
from herder.domain.models import Page

A = "run_01M8EV12AB" + "C" * 16  # 26 characters after run_: 10 of time, 16 random
SAME_SECOND = "run_01M8EV12AX" + "C" * 16  # shares 13 characters after run_ with A
SAME_MILLISECOND = "run_01M8EV12AB" + "D" * 16  # shares the 10 time characters and more


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([A], {A: "run_01M8EV12"}),  # alone: the CLI's minimum, never less
        ([A, SAME_SECOND], {A: "run_01M8EV12AB", SAME_SECOND: "run_01M8EV12AX"}),
        ([A, SAME_MILLISECOND], {A: A[:15], SAME_MILLISECOND: SAME_MILLISECOND[:15]}),
        (
            [A, SAME_SECOND, SAME_MILLISECOND],
            {A: A[:15], SAME_SECOND: "run_01M8EV12AX", SAME_MILLISECOND: SAME_MILLISECOND[:15]},
        ),
        (["wfrun_01M8EV12AB" + "C" * 16], {"wfrun_01M8EV12AB" + "C" * 16: "wfrun_01M8EV12"}),
        ([A, A], {A: "run_01M8EV12"}),  # a run listed twice is one id
        (["local", "not_an_id"], {"local": "local", "not_an_id": "not_an_id"}),  # names: whole
    ],
)
def test_tables_show_the_shortest_start_the_cli_takes_back(
    ids: list[str], expected: dict[str, str]
) -> None:
    shown = short_ids(ids)
    assert shown == expected
    for identifier, start in shown.items():
        assert start == identifier or len(start.partition("_")[2]) >= MIN_PREFIX_CHARACTERS
        others = [other for other in shown if other != identifier]
        assert not any(other.startswith(start) for other in others)


@dataclass(frozen=True)
class Item:
    id: str
    name: str


NIGHTLY = Item("sch_01M8EV12AB" + "C" * 16, "nightly-etl")
TWIN = Item("sch_01M8EV12AX" + "C" * 16, "hourly")  # shares 8 characters with NIGHTLY
ID_SHAPED = Item("sch_01M8F000AA" + "C" * 16, "sch_0123ABCD")  # a name that reads as a start
STORED = [NIGHTLY, TWIN, ID_SHAPED]


def listing(_herder: Any) -> Callable[..., Page[Item]]:
    def page(*, limit: int, id_prefix: str | None = None, name: str | None = None) -> Page[Item]:
        found = [item for item in STORED if item.id.startswith(id_prefix or "")]
        found = [item for item in found if name is None or item.name == name]
        return Page(items=found[:limit], next_cursor=None)

    return page


LISTED_KIND = IdKind("sch", "schedule", listing, Naming.LISTED)
PASSED_KIND = IdKind("sch", "schedule", listing, Naming.PASSED_ON)
ID_KIND = IdKind("sch", "schedule", listing)


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        pytest.param(LISTED_KIND, NIGHTLY.id, NIGHTLY.id, id="whole id"),
        pytest.param(LISTED_KIND, NIGHTLY.id[:15], NIGHTLY.id, id="start"),
        pytest.param(LISTED_KIND, NIGHTLY.id[:15].lower(), NIGHTLY.id, id="start, lower case"),
        pytest.param(LISTED_KIND, NIGHTLY.id[:15] + "…", NIGHTLY.id, id="start copied with …"),
        pytest.param(LISTED_KIND, "nightly-etl", NIGHTLY.id, id="name"),
        pytest.param(LISTED_KIND, "sch_0123ABCD", ID_SHAPED.id, id="name shaped as a start"),
        pytest.param(PASSED_KIND, "nightly-etl", "nightly-etl", id="name the API finds"),
        pytest.param(PASSED_KIND, "sch_batch", "sch_batch", id="short start, a name"),
        pytest.param(ID_KIND, "client-given", "client-given", id="neither: the API answers"),
    ],
)
def test_what_a_command_takes_names_one_id(kind: IdKind, given: str, expected: str) -> None:
    assert full_id(cast(HerderClient, None), kind, given) == expected


@pytest.mark.parametrize(
    ("kind", "given", "message"),
    [
        pytest.param(
            LISTED_KIND, NIGHTLY.id[:12],
            f"{NIGHTLY.id[:12]} is ambiguous: {NIGHTLY.id}, {TWIN.id} (give more characters)",
            id="ambiguous",
        ),
        pytest.param(
            ID_KIND, "sch_01M8", "no schedule sch_01M8: give 8 characters after sch_ or more",
            id="too short",
        ),
        pytest.param(
            LISTED_KIND, "sch_01M8", "no schedule sch_01M8: give 8 characters after sch_ or more",
            id="too short, and no such name",
        ),
        pytest.param(
            ID_KIND, "sch_ZZZZZZZZ", "no schedule starts with sch_ZZZZZZZZ", id="no such start"
        ),
        pytest.param(LISTED_KIND, "weekly", "no schedule is named weekly", id="no such name"),
    ],
)  # fmt: skip
def test_what_names_no_one_id_is_a_clear_error(
    kind: IdKind, given: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit):
        full_id(cast(HerderClient, None), kind, given)
    assert message in " ".join(capsys.readouterr().err.split())


def test_an_id_of_any_kind_is_read_by_its_prefixs_kind() -> None:
    herder = cast(HerderClient, None)
    assert any_full_id(herder, "unknown_01M8") == "unknown_01M8"  # no kind: as it is
    assert any_full_id(herder, "job_nightly") == "job_nightly"  # a job's name, passed on
    with pytest.raises(typer.Exit):
        any_full_id(herder, "run_01M8")  # a run's start, too short
