"""A state's colour in the terminal: its tone's (``domain.state_tones``), so the CLI and the
dashboard colour every state alike and a new state needs no entry here."""

from __future__ import annotations

from herder.domain.state_tones import Tone, tone_of

TONE_STYLES: dict[Tone, str] = {
    Tone.OK: "green",
    Tone.BAD: "bold red",
    Tone.ACTIVE: "cyan",
    Tone.WAITING: "yellow",
    Tone.NEUTRAL: "dim",
}


def state_style(state: str) -> str:
    """The Rich style of a state of any kind (run, task, workflow run, worker…) by its name."""
    return TONE_STYLES[tone_of(state)]
