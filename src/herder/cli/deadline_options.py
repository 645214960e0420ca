"""Deadlines in the CLI: the options that set a job's or a schedule's (``--deadline 5h``),
and how a deadline and a run's deadline are shown."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from herder.cli.common import seconds_in, when
from herder.domain.deadlines import Deadline, duration_words

DeadlineOption = Annotated[
    str | None,
    typer.Option(
        "--deadline",
        help="finished within this long (90s, 10m, 5h) of its submission, or of its "
        "schedule's nominal fire time in the schedule's zone (docs/deadlines.md)",
    ),
]
DeadlineCancelOption = Annotated[
    bool, typer.Option("--deadline-cancel", help="cancel a run that misses its deadline")
]


def deadline_of(within: str | None, cancel: bool) -> dict[str, object] | None:
    """The ``deadline`` field the options ask for (none without ``--deadline``)."""
    if within is None:
        if cancel:
            raise typer.BadParameter("needs --deadline", param_hint="--deadline-cancel")
        return None
    return {"within_seconds": seconds_in(within, "--deadline"), "cancel": cancel}


def deadline_words(deadline: Deadline) -> str:
    """``5h, then cancelled``: a definition's deadline."""
    then = ", then cancelled" if deadline.cancel else ""
    return f"{duration_words(deadline.within_seconds)}{then}"


def deadline_line(deadline_at: datetime, missed_at: datetime | None) -> str:
    """``2026-11-29 06:00:00, missed (unfinished at …)``: a run's deadline."""
    missed = f", missed (unfinished at {when(missed_at)})" if missed_at else ""
    return f"{when(deadline_at)}{missed}"
