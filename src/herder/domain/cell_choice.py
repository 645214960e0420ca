"""Which cell of a region a new tenant goes to (``herder tenant create --region``,
docs/cells.md "Setting it up"): of the region's cells that are up, the one with the fewest
tenants, ties by name, so that tenants spread evenly and the same listing always gives the
same answer. A cell that is down takes no new tenant: its first requests would be 503s.

Pure: the cells come in as the edge lists them (``GET /v1/cells``); the choice, or why there
is none, goes out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from herder.domain.cells import CellStatus


@dataclass(frozen=True)
class NoCell:
    """No cell of the region may take a tenant; ``reason`` says why, to the one who asked."""

    reason: str


def cell_for_new_tenant(cells: Sequence[CellStatus], region: str) -> CellStatus | NoCell:
    """The cell of ``region`` a new tenant should live in, or why none may take it."""
    in_region = [cell for cell in cells if cell.region == region]
    if not in_region:
        known = sorted({cell.region for cell in cells})
        return NoCell(f"no cell is in region {region!r}; regions: {', '.join(known) or 'none'}")
    up = [cell for cell in in_region if cell.up]
    if not up:
        down = ", ".join(sorted(cell.name for cell in in_region))
        return NoCell(f"no cell of region {region} is up (down: {down})")
    return min(up, key=lambda cell: (cell.tenants, cell.name))
