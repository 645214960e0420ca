"""A listing fits its width by dropping its less important columns first, then wrapping kept
ones between words, cutting only free text; one object's view is key/value lines."""

from __future__ import annotations

import pytest
from rich.console import Console

from herder.cli.views import Field, Listing, record

DATE = "2026-12-06 08:37:40"


def rendered(listing: Listing | object, width: int) -> str:
    console = Console(width=width, record=True, file=None, color_system=None)
    with console.capture() as captured:
        console.print(listing)
    return captured.get()


def headers(text: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith("┃")]
    return [cell.strip() for cell in line.strip("┃").split("┃")]


def runs() -> Listing:
    listing = Listing(
        "ID", "JOB", "STATE", Field("ATTEMPTS", drop=2), "CREATED", Field("FINISHED", drop=3),
        Field("EXIT", drop=1), Field("MESSAGE", free=True),
    )  # fmt: skip
    listing.add_row("run_01M957TE", "nightly-report", "succeeded", "1", DATE, DATE, "0",
                    "a message long enough to be cut to what is left of the line")  # fmt: skip
    return listing


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (200, ["ID", "JOB", "STATE", "ATTEMPTS", "CREATED", "FINISHED", "EXIT", "MESSAGE"]),
        (120, ["ID", "JOB", "STATE", "ATTEMPTS", "CREATED", "EXIT", "MESSAGE"]),
        (99, ["ID", "JOB", "STATE", "CREATED", "EXIT", "MESSAGE"]),
        (84, ["ID", "JOB", "STATE", "CREATED", "MESSAGE"]),
        (80, ["ID", "JOB", "STATE", "CREATED"]),  # the free text goes when it cannot get 12
    ],
)
def test_columns_are_dropped_highest_first_and_kept_ones_never_cut(
    width: int, shown: list[str]
) -> None:
    text = rendered(runs(), width)
    assert headers(text) == shown
    assert all(len(line) <= width for line in text.splitlines())
    for whole in ("run_01M957TE", "nightly-report", "succeeded", DATE):
        assert whole in text
    if "MESSAGE" in shown and width < 200:
        assert "…" in text  # only the message is cut


def test_kept_columns_too_wide_even_so_wrap_between_words() -> None:
    listing = Listing("ID", "STATE", "CREATED")
    listing.add_row("run_01M957TE", f"succeeded until {DATE}", DATE)
    text = rendered(listing, 40)
    assert "…" not in text
    assert all(len(line) <= 40 for line in text.splitlines())
    for word in ("succeeded", "2026-12-06", "08:37:40"):
        assert word in text


def test_a_record_is_key_value_lines_leaving_out_what_is_not_there() -> None:
    text = rendered(record("run run_01", [("state", "failed"), ("reason", None), ("pool", "")]), 80)
    assert text.splitlines() == ["run run_01", "state: failed"]
