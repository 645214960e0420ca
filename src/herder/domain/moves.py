"""A tenant's move between cells (docs/cells.md, "Moving a tenant"): the states a tenant
passes through in each cell, which requests each state refuses, and the document that carries
its definitions from one cell to the other.

    source cell:  at home ──freeze──► frozen ──(imported, flipped)──► moved
                     ▲                   │
                     └────unfreeze───────┘  (a step failed before the flip)
    target cell:  (imported) arriving ──taken in──► at home
    a cell it left, when it comes back:
                  moved ──(imported)──► returning ──taken in──► at home (its history kept)
                                            └──import taken back──► moved

A frozen tenant's writes are refused (its runs already made finish there), its schedules fire
no more; an arriving or returning tenant's writes wait for the move's end; a moved tenant is
answered "moved" but for the history it left (a run, a workflow run, an event, read by id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.errors import Conflict, TenantMoving

FROZEN_RETRY_SECONDS = 2  # a move takes seconds: the writes it refuses are tried again soon
MOVED_RETRY_SECONDS = 5  # an edge's cache of homes (HERDER_EDGE_CACHE_SECONDS) has moved on
READS = frozenset({"GET", "HEAD"})
# what a moved tenant left behind and may still read by id (the edge asks its previous homes)
HISTORY_PATH = re.compile(r"^/v1/(?:runs|workflow-runs|events)/[^/]+(?:/[^/]+)*/?$")


class MoveState(StrEnum):
    FROZEN = "frozen"  # leaving this cell: its definitions are being copied
    MOVED = "moved"  # left: it lives in ``move_cell`` now
    ARRIVING = "arriving"  # imported here, until the directory names this cell its home
    RETURNING = "returning"  # imported again where it lived before: its history is here


# (from, to): the moves of a tenant's state; ``None`` is a tenant at home
SHIFTS: frozenset[tuple[MoveState | None, MoveState | None]] = frozenset(
    {
        (None, MoveState.FROZEN),  # the source freezes it
        (MoveState.FROZEN, None),  # a step before the flip failed: it stays
        (MoveState.FROZEN, MoveState.MOVED),  # the directory names the target its home
        (MoveState.ARRIVING, None),  # the target takes it in
        (MoveState.RETURNING, None),  # the cell it left takes it in again
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
        case MoveState.ARRIVING | MoveState.RETURNING:
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


@dataclass(frozen=True)
class MoveFacts:
    """A tenant as a shift of its move reads it, its row held."""

    tenant_id: str
    state: MoveState | None
    cell: str | None
    is_system: bool
    pools: tuple[str | None, ...]  # the pools it names: its default pool, its shares'
    backfills: tuple[str, ...]  # its backfills still starting runs


def shift_refusal(
    facts: MoveFacts, wanted: MoveState | None, cell: str | None, target_pools: Sequence[str] | None
) -> Conflict | None:
    """Why the tenant may not be made ``wanted`` (towards or from ``cell``), or None. A
    freeze is refused for pools ``target_pools`` (the target's) lacks, and for backfills
    under way: their runs are keyed by the schedule and the nominal time in the history,
    which stays here, so the target could not tell which instants of the rest of the range
    ran already, and their active runs finish here (the admin waits for them or cancels
    them)."""
    if facts.is_system:
        return Conflict("the system tenant belongs to its cell: it never moves")
    if not may_shift(facts.state, facts.cell, wanted, cell):
        return Conflict(
            f"tenant {facts.tenant_id} is {facts.state or 'at home'}"
            f"{f' (cell {facts.cell})' if facts.cell else ''}: it cannot be "
            f"made {wanted or 'at home'}{f' (cell {cell})' if cell else ''}"
        )
    if wanted is not MoveState.FROZEN or facts.state is not None:
        return None
    if target_pools is not None and (lacking := pools_lacking(facts.pools, target_pools)):
        return Conflict(
            f"cell {cell} lacks the pools tenant {facts.tenant_id} uses: "
            f"{', '.join(lacking)}; create them there first",
            field="pools",
        )
    if facts.backfills:
        return Conflict(
            f"tenant {facts.tenant_id} has backfills under way: "
            f"{', '.join(facts.backfills)}; wait for them to finish or cancel them",
            field="backfills",
        )
    return None


def import_refusal(
    tenant_id: str, here: tuple[MoveState | None, str | None] | None, from_cell: str
) -> Conflict | None:
    """Why a document of ``tenant_id`` from ``from_cell`` may not be imported into a cell
    where the tenant is ``here`` (its state and the other cell; None: not here), or None.
    A partial import of this same move is replaced (importing twice makes one tenant); a
    tenant that moved away comes back (``arrival``)."""
    if here is None:
        return None
    state, cell = here
    if state is None or state is MoveState.FROZEN:
        return Conflict(f"tenant {tenant_id} already lives in this cell")
    if state is not MoveState.MOVED and cell != from_cell:
        return Conflict(f"tenant {tenant_id} is {state} here from cell {cell}")
    return None


def arrival(here: tuple[MoveState | None, str | None] | None) -> MoveState:
    """How an import the cell takes leaves its tenant: ``returning`` where it lived before
    (moved away, or returning already: the cell keeps its history, so its definitions are
    replaced in place), else ``arriving``."""
    if here is not None and here[0] in (MoveState.MOVED, MoveState.RETURNING):
        return MoveState.RETURNING
    return MoveState.ARRIVING


Row = dict[str, Any]


TENANT_ID_PATTERN = r"^ten_[0-9A-Z]{1,64}$"  # what a cell may import: a tenant id, and no path


def is_tenant_id(text: str) -> bool:
    """Whether ``text`` could be a tenant a cell imports (``TenantExport.tenant_id``)."""
    return re.fullmatch(TENANT_ID_PATTERN, text) is not None


class TenantExport(BaseModel):
    """A tenant's definitions as its source cell read them once it froze: each table's rows
    under the table's name, as JSON (times ISO 8601, bytes base64), the tenant's own ids kept.
    Sealed values travel opened (``sealed_value``, base64) and are sealed again by the
    target with its own key; pool shares name their pool (``pool``), not the source's id.
    It goes from one cell to the other through the edge, over their API, and is kept
    nowhere."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1  # a later shape is another number
    tenant_id: str = Field(pattern=TENANT_ID_PATTERN)
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
    ``cell``, or taken in (``null`` for an arriving or returning one)."""

    model_config = ConfigDict(extra="forbid")

    state: MoveState | None
    cell: str | None = Field(default=None, min_length=1, max_length=63)
    pools: list[str] | None = None  # the target's pools, when freezing


class TenantMoveStatus(BaseModel):
    tenant_id: str
    state: MoveState | None
    cell: str | None
