"""The client's schedule calls: schedules of jobs or workflows, their fires and events, and
cron previews (mixed into ``HerderClient``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

import httpx

from herder.client.pages import PageKeywords, page_params
from herder.domain.models import Page, Schedule, ScheduleEvent, TriggeredFire


def drop_none(values: dict[str, Any]) -> dict[str, Any]:
    """Query parameters without the ones not given."""
    return {key: value for key, value in values.items() if value is not None}


class ScheduleCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_schedule(self, job_id: str, spec: dict[str, Any]) -> Schedule:
        return self.create_schedule_of({"job_id": job_id}, spec)

    def create_schedule_of(self, target: dict[str, str], spec: dict[str, Any]) -> Schedule:
        """A schedule of what ``target`` names: ``{"job_id": …}`` or ``{"workflow_id": …}``."""
        response = self._request("POST", "/v1/schedules", json={**target, **spec})
        return Schedule.model_validate(response.json())

    def get_schedule(self, schedule_id: str) -> Schedule:
        return Schedule.model_validate(self._request("GET", f"/v1/schedules/{schedule_id}").json())

    def list_schedules(
        self,
        *,
        job_id: str | None = None,
        workflow_id: str | None = None,
        name: str | None = None,
        created_by: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Schedule]:
        """``created_by``: ``me`` or an actor (``user:key_…``): only the schedules it made."""
        params = drop_none(
            {"job_id": job_id, "workflow_id": workflow_id, "name": name, "created_by": created_by}
        ) | page_params(page)
        response = self._request("GET", "/v1/schedules", params=params)
        return Page[Schedule].model_validate(response.json())

    def update_schedule(self, schedule_id: str, changes: dict[str, Any]) -> Schedule:
        response = self._request("PATCH", f"/v1/schedules/{schedule_id}", json=changes)
        return Schedule.model_validate(response.json())

    def delete_schedule(self, schedule_id: str) -> None:
        self._request("DELETE", f"/v1/schedules/{schedule_id}")

    def pause_schedule(self, schedule_id: str, *, paused: bool = True) -> Schedule:
        action = "pause" if paused else "resume"
        response = self._request("POST", f"/v1/schedules/{schedule_id}/{action}")
        return Schedule.model_validate(response.json())

    def trigger_schedule(self, schedule_id: str) -> TriggeredFire:
        """Fire it now (paused or not), under its concurrency policy."""
        response = self._request("POST", f"/v1/schedules/{schedule_id}/trigger")
        return TriggeredFire.model_validate(response.json())

    def next_fires(self, schedule_id: str, count: int = 10) -> list[dict[str, Any]]:
        response = self._request(
            "GET", f"/v1/schedules/{schedule_id}/next", params={"count": count}
        )
        fires: list[dict[str, Any]] = response.json()["fires"]
        return fires

    def preview_cron(
        self, cron: str, timezone: str = "UTC", count: int = 10
    ) -> list[dict[str, Any]]:
        body = {"cron": cron, "timezone": timezone, "count": count}
        fires: list[dict[str, Any]] = self._request("POST", "/v1/cron/preview", json=body).json()[
            "fires"
        ]
        return fires

    def schedule_events(self, schedule_id: str) -> list[ScheduleEvent]:
        response = self._request("GET", f"/v1/schedules/{schedule_id}/events")
        return [ScheduleEvent.model_validate(item) for item in response.json()]
