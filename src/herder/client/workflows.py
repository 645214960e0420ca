"""The client's workflow calls: definitions, runs, cancel, suspend, resume and repair (mixed into
``HerderClient``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Unpack

import httpx

from herder.client.errors import ApiError
from herder.client.pages import PageKeywords, page_params
from herder.domain.backfills import Backfill
from herder.domain.models import Page
from herder.domain.workflows.models import Workflow, WorkflowRun, WorkflowRunDetail


class WorkflowCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def create_workflow(self, body: Mapping[str, Any]) -> Workflow:
        """``body`` as the API takes it: name, tasks, params, max_active_runs, concurrency."""
        return Workflow.model_validate(self._request("POST", "/v1/workflows", json=body).json())

    def get_workflow(self, workflow_id: str) -> Workflow:
        return Workflow.model_validate(self._request("GET", f"/v1/workflows/{workflow_id}").json())

    def find_workflow(self, name_or_id: str) -> Workflow:
        """A workflow by id (``wf_…``) or by name (which may start ``wf_`` too)."""
        if name_or_id.startswith("wf_"):
            try:
                return self.get_workflow(name_or_id)
            except ApiError as error:
                if error.status != 404:
                    raise
        page = self.list_workflows(name=name_or_id, limit=1)
        if not page.items:
            raise ApiError(404, "Not found", f"no workflow named {name_or_id!r}")
        return page.items[0]

    def list_workflows(
        self,
        *,
        name: str | None = None,
        created_by: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Workflow]:
        """``created_by``: ``me`` or an actor (``user:key_…``): only the workflows it made."""
        params = _given({"name": name, "created_by": created_by}) | page_params(page)
        response = self._request("GET", "/v1/workflows", params=params)
        return Page[Workflow].model_validate(response.json())

    def update_workflow(
        self, workflow_id: str, body: Mapping[str, Any], *, if_version: int | None = None
    ) -> Workflow:
        """Replace the definition (a new version); with ``if_version`` only if still at it."""
        headers = {"If-Match": f'"{if_version}"'} if if_version is not None else {}
        response = self._request("PUT", f"/v1/workflows/{workflow_id}", json=body, headers=headers)
        return Workflow.model_validate(response.json())

    def delete_workflow(self, workflow_id: str) -> None:
        self._request("DELETE", f"/v1/workflows/{workflow_id}")

    def start_workflow(
        self,
        workflow_id: str,
        params: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> WorkflowRun:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        response = self._request(
            "POST", f"/v1/workflows/{workflow_id}/runs", json={"params": dict(params or {})},
            headers=headers,
        )  # fmt: skip
        return WorkflowRun.model_validate(response.json())

    def get_workflow_run(self, workflow_run_id: str) -> WorkflowRunDetail:
        response = self._request("GET", f"/v1/workflow-runs/{workflow_run_id}")
        return WorkflowRunDetail.model_validate(response.json())

    def list_workflow_runs(
        self,
        *,
        workflow_id: str | None = None,
        state: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[WorkflowRun]:
        params = _given({"workflow_id": workflow_id, "state": state}) | page_params(page)
        response = self._request("GET", "/v1/workflow-runs", params=params)
        return Page[WorkflowRun].model_validate(response.json())

    def decide_workflow_task(
        self, workflow_run_id: str, task: str, *, approved: bool, comment: str | None = None
    ) -> WorkflowRunDetail:
        """Approve or reject a waiting approval task."""
        verb = "approve" if approved else "reject"
        response = self._request(
            "POST", f"/v1/workflow-runs/{workflow_run_id}/tasks/{task}/{verb}",
            json={"comment": comment},
        )  # fmt: skip
        return WorkflowRunDetail.model_validate(response.json())

    def cancel_workflow_run(self, workflow_run_id: str) -> WorkflowRun:
        response = self._request("POST", f"/v1/workflow-runs/{workflow_run_id}/cancel")
        return WorkflowRun.model_validate(response.json())

    def suspend_workflow_run(self, workflow_run_id: str) -> WorkflowRun:
        response = self._request("POST", f"/v1/workflow-runs/{workflow_run_id}/suspend")
        return WorkflowRun.model_validate(response.json())

    def resume_workflow_run(self, workflow_run_id: str) -> WorkflowRun:
        response = self._request("POST", f"/v1/workflow-runs/{workflow_run_id}/resume")
        return WorkflowRun.model_validate(response.json())

    def repair_workflow_run(
        self,
        workflow_run_id: str,
        *,
        repair: int,
        tasks: list[str] | None = None,
        dependents: bool = False,
    ) -> WorkflowRun:
        body = {"repair": repair, "tasks": tasks, "dependents": dependents}
        response = self._request(
            "POST", f"/v1/workflow-runs/{workflow_run_id}/repair", json=_given(body)
        )
        return WorkflowRun.model_validate(response.json())

    def backfill(
        self, schedule_id: str, *, start: datetime, end: datetime, max_active: int = 1
    ) -> Backfill:
        """Run a schedule's nominal times in ``(start, end]``, ``max_active`` at a time."""
        body = {"start": start.isoformat(), "end": end.isoformat(), "max_active": max_active}
        response = self._request("POST", f"/v1/schedules/{schedule_id}/backfills", json=body)
        return Backfill.model_validate(response.json())

    def get_backfill(self, backfill_id: str) -> Backfill:
        return Backfill.model_validate(self._request("GET", f"/v1/backfills/{backfill_id}").json())


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}
