"""Cells and regions (docs/cells.md): a cell is one whole Herder (its PostgreSQL, schedulers,
workers and API processes); every tenant lives in exactly one; a cell belongs to a region.
What the directory holds and the edge serves, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

# The headers the edge sets on every answer it forwards: the cell that gave it, its region
# (read by the client and the dashboard; a cell's own, or a client's, never pass).
CELL_HEADER, REGION_HEADER = "Herder-Cell", "Herder-Region"
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"  # a DNS label: it may name hosts and buckets
API_URL_PATTERN = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"


class CellCreate(BaseModel):
    name: str = Field(pattern=NAME_PATTERN, description="the cell's name, a DNS label")
    region: str = Field(pattern=NAME_PATTERN, description="its region (made when first named)")
    api_url: str = Field(
        max_length=2048, pattern=API_URL_PATTERN, description="where its API processes answer"
    )


class Cell(BaseModel):
    name: str
    region: str
    api_url: str
    is_default: bool = Field(
        description="where tenants made before cells live, and keys made before cells go"
    )
    created_at: datetime


class CellStatus(Cell):
    up: bool = Field(description="whether its API answered /readyz with 200 just now")
    tenants: int = Field(description="tenants the directory places in it")


class CellListing(BaseModel):
    items: list[CellStatus]


class Placement(BaseModel):
    """Where a tenant lives."""

    tenant_id: str
    cell: str
    placed_at: datetime


class Home(BaseModel):
    """Where a tenant lives, whether it is moving (to ``moving_to``), and the cells it lived
    in before (newest first), whose history the edge still reads."""

    cell: Cell
    moving_to: str | None = None
    previous: list[Cell] = []


@dataclass(frozen=True, slots=True)
class Residence:
    """Where a tenant lives, by cell name: what the edge keeps per tenant. Each cell's own
    record is kept once, by name, beside it; at 100,000 tenants and more a full ``Home``
    each (every cell's record copied per tenant) would cost about 2 kB a tenant."""

    cell: str
    moving_to: str | None = None
    previous: tuple[str, ...] = ()  # newest first


class TenantMoved(BaseModel):
    """A move's answer at the edge."""

    tenant_id: str
    from_cell: str = Field(description="the cell it left; its runs stay there, readable by id")
    to_cell: str
    schedules: int = Field(description="schedules handed over")
    artifacts: int = Field(description="programs copied")
