"""Every task state has a colour of its own in the workflow graph, readable under white text."""

from __future__ import annotations

from herder.api.dashboard.state_colours import TASK_STATE_COLOURS
from herder.domain.states import RunState

WCAG_GRAPHICS_CONTRAST = 3.0  # the least contrast WCAG asks of large text and graphics


def contrast_with_white(colour: str) -> float:
    """WCAG's contrast ratio of white on ``colour`` (#rrggbb)."""
    channels = [int(colour[start : start + 2], 16) / 255 for start in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 1.05 / (luminance + 0.05)


def test_every_task_state_has_a_colour() -> None:
    assert set(TASK_STATE_COLOURS) == set(RunState)


def test_no_two_states_share_a_colour() -> None:
    assert len(set(TASK_STATE_COLOURS.values())) == len(TASK_STATE_COLOURS)
    assert TASK_STATE_COLOURS[RunState.UPSTREAM_FAILED] != TASK_STATE_COLOURS[RunState.FAILED]


def test_white_text_reads_on_every_colour() -> None:
    unreadable = {
        state: colour
        for state, colour in TASK_STATE_COLOURS.items()
        if contrast_with_white(colour) < WCAG_GRAPHICS_CONTRAST
    }
    assert unreadable == {}
