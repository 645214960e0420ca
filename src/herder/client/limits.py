"""The client's limit calls (mixed into ``HerderClient``): a tenant's named limits by key
(docs/flow-control.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack
from urllib.parse import quote

import httpx

from herder.client.pages import PageKeywords, page_params
from herder.domain.limits import Limit, LimitKeyUsage
from herder.domain.models import Page


class LimitCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_limit(self, name: str, spec: dict[str, Any]) -> Limit:
        """A limit; ``spec`` holds ``max_running``, ``rate``, ``strategy``, ``debounce``
        and ``description`` (LimitSpec)."""
        body = {"name": name, **spec}
        return Limit.model_validate(self._request("POST", "/v1/limits", json=body).json())

    def list_limits(self, **page: Unpack[PageKeywords]) -> Page[Limit]:
        response = self._request("GET", "/v1/limits", params=page_params(page))
        return Page[Limit].model_validate(response.json())

    def get_limit(self, limit: str) -> Limit:
        """By id or name."""
        return Limit.model_validate(self._request("GET", f"/v1/limits/{quote(limit)}").json())

    def update_limit(
        self, limit: str, changes: dict[str, Any], *, if_version: int | None = None
    ) -> Limit:
        """Each field given replaces the stored one (None clears an optional one); with
        ``if_version``, only if the limit is still at that version (else 412)."""
        headers = {} if if_version is None else {"If-Match": f'"{if_version}"'}
        response = self._request(
            "PATCH", f"/v1/limits/{quote(limit)}", json=changes, headers=headers
        )
        return Limit.model_validate(response.json())

    def delete_limit(self, limit: str) -> None:
        """Refused (409) while jobs, schedules or workflows name it."""
        self._request("DELETE", f"/v1/limits/{quote(limit)}")

    def limit_keys(self, limit: str, *, count: int = 100) -> list[LimitKeyUsage]:
        """The limit's keys with active runs, busiest first."""
        response = self._request("GET", f"/v1/limits/{quote(limit)}/keys", params={"limit": count})
        return [LimitKeyUsage.model_validate(item) for item in response.json()]
