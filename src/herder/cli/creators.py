"""Who made an object, in the CLI: the ``--created-by`` option the listings share, and the
creator as a ``show`` prints it."""

from __future__ import annotations

from typing import Annotated, Protocol

import typer


class Created(Protocol):
    @property
    def created_by(self) -> str | None: ...

    @property
    def created_by_name(self) -> str | None: ...


CreatedByOption = Annotated[
    str | None,
    typer.Option(
        "--created-by",
        metavar="me|ACTOR",
        help="only what this made: me (your key or you), or an actor such as user:key_… "
        "or schedule:sch_…",
    ),
]


def creator_shown(item: Created) -> str:
    """A person by name (``deployer``: people read names, as run events show them; the actor
    for ``--created-by`` is in the JSON), the system's actor as it is (``schedule:sch_01…``),
    ``unknown`` for what was made before creators were kept."""
    if item.created_by is None:
        return "unknown"
    return item.created_by_name or item.created_by
