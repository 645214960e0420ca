"""The options that set a job's or a schedule's ``deadline`` (``herder job create``,
``herder schedule create``), as a duration: ``--deadline 5h``."""

from __future__ import annotations

from typing import Annotated

import typer

from herder.cli.common import seconds_in

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
