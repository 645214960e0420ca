"""How tables abbreviate ids: the shortest start no other shown id shares, never shorter than
what the CLI takes back."""

from __future__ import annotations

import pytest

from herder.cli.ids import MIN_PREFIX_CHARACTERS, short_ids

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
