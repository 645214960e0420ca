"""The client's tenant administration calls: API keys, people's sessions and the audit log
(mixed into ``HerderClient``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Unpack

import httpx

from herder.api.schemas import CreatedKey
from herder.client.pages import CursorKeywords, PageKeywords, page_params
from herder.client.schedules import drop_none
from herder.domain.audit import AuditEntry
from herder.domain.models import ApiKey, Page
from herder.domain.sign_in import Session


class AdminCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_key(
        self,
        *,
        role: str = "developer",
        name: str = "api key",
        expires_at: datetime | None = None,
        tenant_id: str | None = None,
    ) -> CreatedKey:
        """A key of the caller's tenant (or of ``tenant_id``: system admins); its token is
        the only copy of the secret."""
        path = f"/v1/tenants/{tenant_id}/keys" if tenant_id else "/v1/keys"
        body = drop_none({"role": role, "name": name, "expires_at": _iso(expires_at)})
        return CreatedKey.model_validate(self._request("POST", path, json=body).json())

    def list_keys(
        self,
        *,
        tenant_id: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[ApiKey]:
        params = drop_none({"tenant_id": tenant_id}) | page_params(page)
        return Page[ApiKey].model_validate(self._request("GET", "/v1/keys", params=params).json())

    def get_key(self, key_id: str) -> ApiKey:
        return ApiKey.model_validate(self._request("GET", f"/v1/keys/{key_id}").json())

    def revoke_key(self, key_id: str) -> ApiKey:
        return ApiKey.model_validate(self._request("POST", f"/v1/keys/{key_id}/revoke").json())

    def list_sessions(self, **page: Unpack[PageKeywords]) -> Page[Session]:
        """The tenant's people's sessions, newest first, ended ones too (its admins)."""
        response = self._request("GET", "/v1/sessions", params=page_params(page))
        return Page[Session].model_validate(response.json())

    def revoke_session(self, session_id: str) -> Session:
        """End a person's session: they must sign in again (revoking twice changes nothing)."""
        response = self._request("POST", f"/v1/sessions/{session_id}/revoke")
        return Session.model_validate(response.json())

    def audit(
        self,
        *,
        tenant_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        key_id: str | None = None,
        **page: Unpack[CursorKeywords],
    ) -> Page[AuditEntry]:
        """The audit log, newest first."""
        params = drop_none(
            {
                "tenant_id": tenant_id, "since": _iso(since), "until": _iso(until),
                "object_type": object_type, "object_id": object_id, "key_id": key_id,
            }
        ) | page_params(page)  # fmt: skip
        response = self._request("GET", "/v1/audit", params=params)
        return Page[AuditEntry].model_validate(response.json())


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
