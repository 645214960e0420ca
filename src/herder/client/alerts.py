"""The client's alert calls: channels, rules, incidents and deliveries (mixed into
``HerderClient``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Unpack

import httpx

from herder.client.pages import CursorKeywords, PageKeywords, page_params
from herder.client.schedules import drop_none
from herder.domain.alerts.notices import JobNotice
from herder.domain.alerts.rules import Channel, CreatedChannel, Delivery, Incident, Rule
from herder.domain.models import Page


class AlertCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_alert_channel(
        self, name: str, url: str, *, kind: str = "webhook", enabled: bool = True
    ) -> CreatedChannel:
        """``url``: a webhook's URL, ``mailto:a@example.com,…`` (email) or a Slack
        incoming webhook's URL (slack)."""
        body = {"name": name, "kind": kind, "url": url, "enabled": enabled}
        response = self._request("POST", "/v1/alert-channels", json=body)
        return CreatedChannel.model_validate(response.json())

    def list_alert_channels(
        self, *, name: str | None = None, **page: Unpack[PageKeywords]
    ) -> Page[Channel]:
        params = page_params(page) | drop_none({"name": name})
        response = self._request("GET", "/v1/alert-channels", params=params)
        return Page[Channel].model_validate(response.json())

    def delete_alert_channel(self, channel_id: str) -> None:
        self._request("DELETE", f"/v1/alert-channels/{channel_id}")

    def test_alert_channel(self, channel_id: str) -> str:
        """Queue a signed test delivery; its id."""
        response = self._request("POST", f"/v1/alert-channels/{channel_id}/test")
        return str(response.json()["delivery_id"])

    def create_alert_rule(self, body: Mapping[str, Any]) -> Rule:
        """``body`` as the API takes it: name, kind, params, channel_ids, notify_recovery."""
        return Rule.model_validate(self._request("POST", "/v1/alert-rules", json=body).json())

    def list_alert_rules(
        self, *, name: str | None = None, **page: Unpack[PageKeywords]
    ) -> Page[Rule]:
        params = page_params(page) | drop_none({"name": name})
        response = self._request("GET", "/v1/alert-rules", params=params)
        return Page[Rule].model_validate(response.json())

    def delete_alert_rule(self, rule_id: str) -> None:
        self._request("DELETE", f"/v1/alert-rules/{rule_id}")

    def set_job_notices(self, job_id: str, on: list[str], *, to: str | None = None) -> JobNotice:
        """The caller's notices of the job (``on``: failed, timed_out, deadline_missed,
        approval), to ``to`` (an address, a Slack webhook's URL, a channel's name) or, when
        None, the signed-in person's email; replaces what it had."""
        body = drop_none({"on": on, "to": to})
        response = self._request("PUT", f"/v1/jobs/{job_id}/notices", json=body)
        return JobNotice.model_validate(response.json())

    def job_notices(self, job_id: str) -> JobNotice:
        """The caller's notices of the job (``ApiError`` 404: none)."""
        response = self._request("GET", f"/v1/jobs/{job_id}/notices")
        return JobNotice.model_validate(response.json())

    def delete_job_notices(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}/notices")

    def list_alerts(
        self, *, state: str | None = None, **page: Unpack[CursorKeywords]
    ) -> Page[Incident]:
        params = page_params(page) | ({"state": state} if state else {})
        response = self._request("GET", "/v1/alerts", params=params)
        return Page[Incident].model_validate(response.json())

    def list_alert_deliveries(
        self, *, channel_id: str | None = None, **page: Unpack[CursorKeywords]
    ) -> Page[Delivery]:
        params = page_params(page) | ({"channel_id": channel_id} if channel_id else {})
        response = self._request("GET", "/v1/alert-deliveries", params=params)
        return Page[Delivery].model_validate(response.json())
