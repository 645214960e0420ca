"""The client's secret calls (mixed into ``HerderClient``): a value goes up, only metadata
comes back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Unpack
from urllib.parse import quote

import httpx

from herder.client.pages import CursorKeywords, page_params
from herder.domain.models import Page
from herder.domain.secrets import Secret


def _path(name: str) -> str:
    return f"/v1/secrets/{quote(name, safe='')}"


class SecretCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def set_secret(self, name: str, value: str) -> tuple[Secret, bool]:
        """Create the secret or give it a new value; whether it was created."""
        response = self._request("PUT", _path(name), json={"value": value})
        return Secret.model_validate(response.json()), response.status_code == 201

    def get_secret(self, name: str) -> Secret:
        return Secret.model_validate(self._request("GET", _path(name)).json())

    def list_secrets(self, **page: Unpack[CursorKeywords]) -> Page[Secret]:
        response = self._request("GET", "/v1/secrets", params=page_params(page))
        return Page[Secret].model_validate(response.json())

    def delete_secret(self, name: str) -> None:
        self._request("DELETE", _path(name))
