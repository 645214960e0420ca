"""A tenant's move between cells (docs/cells.md, "Moving a tenant"): the states a tenant
passes through in each cell, which requests each state refuses, and the document that carries
its definitions from one cell to the other.

    source cell:  at home ──freeze──► frozen ──(imported, flipped)──► moved
                     ▲                   │
                     └────unfreeze───────┘  (a step failed before the flip)
    target cell:  (imported) arriving ──arrived──► at home

A frozen tenant's writes are refused (its runs already made finish there), its schedules fire
no more; an arriving tenant's writes wait for the move's end; a moved tenant is answered
"moved" but for the history it left (a run, a workflow run, an event, read by id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.errors import TenantMoving

FROZEN_RETRY_SECONDS = 2  # a move takes seconds: the writes it refuses are tried again soon
MOVED_RETRY_SECONDS = 5  # an edge's cache of homes (HERDER_EDGE_CACHE_SECONDS) has moved on
READS = frozenset({"GET", "HEAD"})
# what a moved tenant left behind and may still read by id (the edge asks its previous homes)
HISTORY_PATH = re.compile(r"^/v1/(?:runs|workflow-runs|events)/[^/]+(?:/[^/]+)*/?$")


class MoveState(StrEnum):
    FROZEN = "frozen"  # leaving this cell: its definitions are being copied
    MOVED = "moved"  # left: it lives in ``move_cell`` now
    ARRIVING = "arriving"  # imported here, until the directory names this cell its home


# (from, to): the moves of a tenant's state; ``None`` is a tenant at home
SHIFTS: frozenset[tuple[MoveState | None, MoveState | None]] = frozenset(
    {
        (None, MoveState.FROZEN),  # the source freezes it
        (MoveState.FROZEN, None),  # a step before the flip failed: it stays
        (MoveState.FROZEN, MoveState.MOVED),  # the directory names the target its home
        (MoveState.ARRIVING, None),  # the target takes it in
    }
)


def may_shift(
    current: MoveState | None,
    current_cell: str | None,
    wanted: MoveState | None,
    cell: str | None,
) -> bool:
    """Whether a tenant in ``current`` (towards or from ``current_cell``) may go to
    ``wanted``; asking again for the state it is in, for the same cell, is allowed (a move
    run again after an answer was lost)."""
    if current == wanted:
        return current is None or current_cell == cell
    if current is MoveState.FROZEN and current_cell != cell and wanted is MoveState.MOVED:
        return False
    return (current, wanted) in SHIFTS


def refusal(
    tenant_id: str, state: MoveState | None, cell: str | None, method: str, path: str
) -> TenantMoving | None:
    """Why a request of a tenant in ``state`` is refused, or None when it is served."""
    if state is None:
        return None
    where = cell or "another cell"
    match state:
        case MoveState.FROZEN:
            if method in READS:
                return None
            return TenantMoving(
                f"tenant {tenant_id} is moving to cell {where}: try again once it has moved",
                cell=where,
                retry_after_seconds=FROZEN_RETRY_SECONDS,
            )
        case MoveState.ARRIVING:
            if method in READS:
                return None
            return TenantMoving(
                f"tenant {tenant_id} is moving here from cell {where}: try again in a moment",
                cell=where,
                retry_after_seconds=FROZEN_RETRY_SECONDS,
            )
        case MoveState.MOVED:
            if method in READS and is_history(path):
                return None
            return TenantMoving(
                f"tenant {tenant_id} moved to cell {where}",
                cell=where,
                retry_after_seconds=MOVED_RETRY_SECONDS,
            )
        case _:
            assert_never(state)


def is_history(path: str) -> bool:
    """A path that reads one run, workflow run or event by id (or what hangs under it)."""
    return HISTORY_PATH.match(path) is not None


def pools_lacking(needed: Iterable[str | None], available: Iterable[str]) -> list[str]:
    """The pools a tenant names (its default pool, its shares) that the target lacks."""
    have = set(available)
    return sorted({pool for pool in needed if pool is not None and pool not in have})


Row = dict[str, Any]


class TenantExport(BaseModel):
    """A tenant's definitions as its source cell read them once it froze: each table's rows
    under the table's name, as JSON (times ISO 8601, bytes base64), the tenant's own ids kept.
    Sealed values travel opened (``sealed_value``, base64) and are sealed again by the
    target with its own key; pool shares name their pool (``pool``), not the source's id.
    It goes from one cell to the other through the edge, over their API, and is kept
    nowhere."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1  # a later shape is another number
    tenant_id: str = Field(pattern=r"^ten_[0-9A-Z]{1,64}$")
    from_cell: str = Field(default="", max_length=63)  # set by the edge, which knows it
    tables: dict[str, list[Row]]

    def rows(self, table: str) -> list[Row]:
        return self.tables.get(table, [])

    @property
    def artifacts(self) -> list[str]:
        """The sha256 of each program whose bytes the target needs before the import."""
        return [str(row["sha256"]) for row in self.rows("artifacts")]


class MoveShift(BaseModel):
    """A cell's part in a move: its tenant frozen (``frozen``, towards ``cell``, refused with
    409 when it names pools ``pools`` lacks), unfrozen (``null``), marked ``moved`` to
    ``cell``, or taken in (``null`` for an arriving one)."""

    model_config = ConfigDict(extra="forbid")

    state: MoveState | None
    cell: str | None = Field(default=None, min_length=1, max_length=63)
    pools: list[str] | None = None  # the target's pools, when freezing


class TenantMoveStatus(BaseModel):
    tenant_id: str
    state: MoveState | None
    cell: str | None
