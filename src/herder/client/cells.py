"""The client's calls on the edge's cells (docs/cells.md; mixed into ``HerderClient``): they
answer only through an edge, to a system admin."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from herder.client.schedules import drop_none
from herder.domain.cells import CELL_HEADER, REGION_HEADER, Cell, CellListing, TenantMoved
from herder.domain.models import Tenant


@dataclass(frozen=True)
class AnsweringCell:
    """The cell (and its region) an answer came from through an edge; a server reached
    directly (``herder up``, a cell's own address) names none."""

    name: str
    region: str | None

    @classmethod
    def of(cls, headers: httpx.Headers) -> AnsweringCell | None:
        name = headers.get(CELL_HEADER)
        return None if name is None else cls(name, headers.get(REGION_HEADER))


class CellCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_cell(self, name: str, *, region: str, api_url: str) -> Cell:
        body = {"name": name, "region": region, "api_url": api_url}
        return Cell.model_validate(self._request("POST", "/v1/cells", json=body).json())

    def list_cells(self) -> CellListing:
        """Every cell with its health (its /readyz, asked now) and its tenants' count."""
        return CellListing.model_validate(self._request("GET", "/v1/cells").json())

    def create_tenant_in(
        self,
        cell: str,
        name: str,
        *,
        weight: int = 1,
        quotas: dict[str, Any] | None = None,
        cell_key: str | None = None,
    ) -> Tenant:
        """A tenant made in ``cell`` and placed there. The cell takes only its own system
        admin's key: ``cell_key`` when this client's key is not one (it is another cell's)."""
        body = drop_none({"name": name, "weight": weight, "quotas": quotas})
        headers = {"Authorization": f"Bearer {cell_key}"} if cell_key else {}
        answer = self._request("POST", f"/v1/cells/{cell}/tenants", json=body, headers=headers)
        return Tenant.model_validate(answer.json())

    def adopt_tenants(self, cell: str) -> dict[str, Any]:
        """Places the tenants ``cell`` has that the directory lacks (made before cells)."""
        adopted: dict[str, Any] = self._request("POST", f"/v1/cells/{cell}/adopt").json()
        return adopted

    def move_tenant(self, tenant_id: str, to: str, *, target_key: str | None = None) -> TenantMoved:
        """Moves the tenant to cell ``to`` (docs/cells.md, "Moving a tenant"): this client's
        key a system admin's of the cell it lives in, ``target_key`` one of ``to``'s."""
        headers = {"X-Herder-Target-Key": target_key} if target_key else {}
        answer = self._request("POST", f"/v1/cells/{to}/tenants/{tenant_id}/move", headers=headers)
        return TenantMoved.model_validate(answer.json())
