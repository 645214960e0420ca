"""The client's resource pool calls (mixed into ``HerderClient``): system admins make and
change pools; any key reads those its tenant may use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack
from urllib.parse import quote

import httpx

from herder.client.pages import PageKeywords, page_params
from herder.client.schedules import drop_none
from herder.domain.autoscaling import PoolAutoscaling
from herder.domain.forecast import Forecast
from herder.domain.models import Page
from herder.domain.pools import Pool


class PoolCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_pool(self, name: str, spec: dict[str, Any] | None = None) -> Pool:
        """A pool; ``spec`` holds ``description``, ``selector`` and ``shares`` (PoolSpec)."""
        body = {"name": name, **(spec or {})}
        return Pool.model_validate(self._request("POST", "/v1/pools", json=body).json())

    def list_pools(
        self,
        *,
        usable: bool = False,
        **page: Unpack[PageKeywords],
    ) -> Page[Pool]:
        """Every pool (system admins), or those the caller's tenant may use."""
        params = drop_none({"usable": usable or None}) | page_params(page)
        return Page[Pool].model_validate(self._request("GET", "/v1/pools", params=params).json())

    def get_pool(self, pool: str) -> Pool:
        """By id or name."""
        return Pool.model_validate(self._request("GET", f"/v1/pools/{quote(pool)}").json())

    def usable_pools(self) -> set[str]:
        """The names of the pools the caller's own tenant may use."""
        names: set[str] = set()
        cursor = None
        while True:
            page = self.list_pools(usable=True, limit=1000, cursor=cursor)
            names.update(pool.name for pool in page.items)
            if page.next_cursor is None:
                return names
            cursor = page.next_cursor

    def update_pool(self, pool: str, changes: dict[str, Any]) -> Pool:
        """Each of ``description``, ``selector`` (None: the default) and ``shares`` (the
        whole list) given replaces the stored one."""
        response = self._request("PATCH", f"/v1/pools/{quote(pool)}", json=changes)
        return Pool.model_validate(response.json())

    def pool_autoscaling(self, pool: str) -> PoolAutoscaling:
        """The workers the pool should have now, and why (system admins)."""
        response = self._request("GET", f"/v1/pools/{quote(pool)}/autoscaling")
        return PoolAutoscaling.model_validate(response.json())

    def forecast(self, *, pool: str | None = None, minutes: int = 60) -> Forecast:
        """What the schedules foretell, minute by minute from now."""
        params = drop_none({"pool": pool, "minutes": minutes})
        return Forecast.model_validate(self._request("GET", "/v1/forecast", params=params).json())

    def delete_pool(self, pool: str) -> None:
        self._request("DELETE", f"/v1/pools/{quote(pool)}")
