"""``HerderClient``: one HTTP connection with the key, errors mapped, and the calls on
artifacts, jobs, runs, logs, the queue, stats, workers and tenants; the other groups of
calls are mixed in from their modules."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, Unpack

import httpx
from pydantic import BaseModel

from herder.api.schemas import MAX_BATCH_RUNS, RunBatchResult
from herder.client.admin import AdminCalls
from herder.client.alerts import AlertCalls
from herder.client.errors import ApiError, ServerUnreachable
from herder.client.events import EventCalls
from herder.client.limits import LimitCalls
from herder.client.pages import CursorKeywords, PageKeywords, page_params
from herder.client.pools import PoolCalls
from herder.client.schedules import ScheduleCalls, drop_none
from herder.client.secrets import SecretCalls
from herder.client.uploads import MultipartUpload, UploadProgress
from herder.client.usage import UsageCalls
from herder.client.workflows import WorkflowCalls
from herder.domain.jobs import Priority
from herder.domain.models import (
    Artifact,
    CheckpointInfo,
    Job,
    LogChunk,
    Page,
    QueueEntry,
    Run,
    RunDetail,
    RunEvent,
    Tenant,
    Worker,
)
from herder.domain.stats import Stats

# An idle connection is dropped well before the server closes it (``http_head``'s
# ``SERVER_KEEP_ALIVE_SECONDS``): a request is never sent on one the server is closing.
KEEP_ALIVE_SECONDS = 4.0
POLL_BACK_OFF = 1.5  # each pause of ``wait`` half again as long as the last, to its ceiling


class Logs(BaseModel):
    attempt: int | None
    chunks: list[LogChunk]
    next_after: int
    complete: bool


class HerderClient(
    ScheduleCalls,
    WorkflowCalls,
    AlertCalls,
    AdminCalls,
    SecretCalls,
    PoolCalls,
    LimitCalls,
    UsageCalls,
    EventCalls,
):
    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        """``http``: an HTTP client to send through instead of a new one (say, an in-process
        app's test client); it stays open when this client closes."""
        self.url = url.rstrip("/")
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self._owns_http = http is None
        self._http = http or httpx.Client(
            base_url=self.url,
            timeout=timeout,
            limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_SECONDS),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self._auth, **kwargs.pop("headers", {})}
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TransportError as error:
            raise ServerUnreachable(
                f"cannot reach the Herder server at {self.url}: {error}"
            ) from error
        if response.status_code >= 400:
            raise ApiError.of(response)
        return response

    # --- artifacts ---

    def upload_artifact(self, path: Path, *, progress: UploadProgress | None = None) -> Artifact:
        """Streamed from the file; ``progress(sent, total)`` is called as the bytes go."""
        with path.open("rb") as file:
            body = MultipartUpload(file, path.name, progress)
            response = self._request("POST", "/v1/artifacts", content=body, headers=body.headers)
        return Artifact.model_validate(response.json())

    # --- jobs ---

    def create_job(self, name: str, spec: dict[str, Any]) -> Job:
        return Job.model_validate(
            self._request("POST", "/v1/jobs", json={"name": name, **spec}).json()
        )

    def get_job(self, job_id: str) -> Job:
        return Job.model_validate(self._request("GET", f"/v1/jobs/{job_id}").json())

    def find_job(self, name_or_id: str) -> Job:
        """A job by id (``job_…``) or by name (which may start ``job_`` too)."""
        if name_or_id.startswith("job_"):
            try:
                return self.get_job(name_or_id)
            except ApiError as error:
                if error.status != 404:
                    raise
        page = self.list_jobs(name=name_or_id, limit=1)
        if not page.items:
            raise ApiError(404, "Not found", f"no job named {name_or_id!r}")
        return page.items[0]

    def list_jobs(
        self,
        *,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Job]:
        params = page_params(page) | drop_none({"name": name})
        params["label"] = [f"{key}={value}" for key, value in (labels or {}).items()]
        response = self._request("GET", "/v1/jobs", params=params)
        return Page[Job].model_validate(response.json())

    def update_job(self, job_id: str, changes: dict[str, Any]) -> Job:
        return Job.model_validate(self._request("PATCH", f"/v1/jobs/{job_id}", json=changes).json())

    def delete_job(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}")

    # --- runs ---

    def start_run(
        self,
        job_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        priority: Priority | None = None,
        run_at: datetime | None = None,
        delay_seconds: int | None = None,
    ) -> Run:
        """A one-off run with values for the job's declared ``params`` (and its own
        ``priority`` class, up to the tenant's max), started at ``run_at`` or after
        ``delay_seconds`` if given; raw ``args`` and ``env`` need a developer key."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = drop_none(
            {"params": dict(params) if params else None, "args": args, "env": env,
             "priority": priority.value if priority else None,
             "run_at": run_at.isoformat() if run_at else None, "delay_seconds": delay_seconds}
        )  # fmt: skip
        response = self._request("POST", f"/v1/jobs/{job_id}/runs", json=body, headers=headers)
        return Run.model_validate(response.json())

    def get_run(self, run_id: str) -> RunDetail:
        return RunDetail.model_validate(self._request("GET", f"/v1/runs/{run_id}").json())

    def list_runs(
        self,
        *,
        job_id: str | None = None,
        states: list[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        schedule_id: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Run]:
        params = drop_none(
            {
                "job_id": job_id,
                "schedule_id": schedule_id,
                "state": states or None,
                "since": since.isoformat() if since else None,
                "until": until.isoformat() if until else None,
            }
        ) | page_params(page)
        return Page[Run].model_validate(self._request("GET", "/v1/runs", params=params).json())

    def rerun(self, run_id: str) -> Run:
        return Run.model_validate(self._request("POST", f"/v1/runs/{run_id}/rerun").json())

    def events(self, run_id: str) -> list[RunEvent]:
        response = self._request("GET", f"/v1/runs/{run_id}/events")
        return [RunEvent.model_validate(item) for item in response.json()]

    def cancel_run(self, run_id: str) -> Run:
        return Run.model_validate(self._request("POST", f"/v1/runs/{run_id}/cancel").json())

    def suspend_run(self, run_id: str) -> Run:
        return Run.model_validate(self._request("POST", f"/v1/runs/{run_id}/suspend").json())

    def set_run_priority(self, run_id: str, priority: Priority) -> Run:
        """Another class for a run not started yet (keeping its place in time)."""
        body = {"priority": priority.value}
        return Run.model_validate(
            self._request("POST", f"/v1/runs/{run_id}/priority", json=body).json()
        )

    def resume_run(self, run_id: str) -> Run:
        return Run.model_validate(self._request("POST", f"/v1/runs/{run_id}/resume").json())

    def get_checkpoint(self, run_id: str) -> CheckpointInfo:
        """The run's last saved checkpoint (``ApiError`` 404 when it has none)."""
        response = self._request("GET", f"/v1/runs/{run_id}/checkpoint")
        return CheckpointInfo.model_validate(response.json())

    def download_checkpoint(self, run_id: str) -> bytes:
        """Its bytes: a gzip'd tar of the checkpoint directory."""
        return self._request("GET", f"/v1/runs/{run_id}/checkpoint/content").content

    def delete_checkpoint(self, run_id: str) -> None:
        """The run's next attempt starts without one."""
        self._request("DELETE", f"/v1/runs/{run_id}/checkpoint")

    def logs(
        self,
        run_id: str,
        *,
        attempt: int | None = None,
        rank: int = 0,
        after: int = -1,
        follow: bool = False,
    ) -> Logs:
        """Output of one attempt (the newest by default); ``rank`` picks a gang member."""
        params = drop_none(
            {"attempt": attempt, "rank": rank or None, "after": after, "follow": follow}
        )
        response = self._request("GET", f"/v1/runs/{run_id}/logs", params=params)
        return Logs.model_validate(response.json())

    def logs_so_far(self, run_id: str, *, attempt: int | None = None) -> Iterator[LogChunk]:
        """Every chunk the attempt (the newest by default) has written so far, page after
        page, without waiting for more; the attempt is the first page's throughout."""
        after = -1
        while True:
            page = self.logs(run_id, attempt=attempt, after=after)
            yield from page.chunks
            if page.complete or not page.chunks:
                return
            attempt, after = page.attempt, page.next_after

    def follow_logs(self, run_id: str, *, attempt: int | None = None) -> Iterator[LogChunk]:
        """Every chunk of the attempt (the newest by default) until it has ended."""
        after = -1
        while True:
            page = self.logs(run_id, attempt=attempt, after=after, follow=True)
            yield from page.chunks
            after = page.next_after
            if page.complete:
                return

    def submit_runs(self, runs: Sequence[Mapping[str, Any]]) -> RunBatchResult:
        """One batch (≤ 1,000) of runs, each ``{"job_id": …}`` with optional overrides and
        ``idempotency_key``; every run is answered on its own (see ``Submission``)."""
        response = self._request("POST", "/v1/runs/batch", json={"runs": list(runs)})
        return RunBatchResult.model_validate(response.json())

    def start_runs(
        self,
        job_id: str,
        count: int,
        *,
        params: Mapping[str, Any] | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> list[str]:
        """``count`` runs of the job, in batches of 1,000; their ids in order. Raises the
        first run's problem if any was refused."""
        overrides = {"params": dict(params) if params else None, "args": args, "env": env}
        item = {"job_id": job_id, **drop_none(overrides)}
        run_ids: list[str] = []
        for start in range(0, count, MAX_BATCH_RUNS):
            result = self.submit_runs([item] * min(MAX_BATCH_RUNS, count - start))
            for one in result.items:
                if one.run_id is None:
                    field = one.field.split(".", 2)[2] if one.field else None  # not runs.i.
                    raise ApiError(
                        one.status, one.title or "", one.detail or "refused", field=field
                    )
                run_ids.append(one.run_id)
        return run_ids

    def wait(
        self, run_id: str, *, timeout: float = 60.0, poll: float = 0.1, max_poll: float = 1.0
    ) -> RunDetail:
        """Block until the run is in a terminal state (or raise ``TimeoutError``). Asks every
        ``poll`` seconds at first, each pause half again as long up to ``max_poll``: a
        short run is seen ending at once, and ``run start --wait`` on a day-long run asks
        once a second, not ten times."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id)
            if run.state.is_terminal:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {run.state} after {timeout}s")
            time.sleep(poll)
            poll = min(poll * POLL_BACK_OFF, max(poll, max_poll))

    # --- queue ---

    def queue(
        self, *, job_id: str | None = None, **page: Unpack[CursorKeywords]
    ) -> Page[QueueEntry]:
        """Queued runs in dispatch order (every tenant's, for the system admins)."""
        params = drop_none({"job_id": job_id}) | page_params(page)
        response = self._request("GET", "/v1/queue", params=params)
        return Page[QueueEntry].model_validate(response.json())

    # --- overview ---

    def stats(self, minutes: int = 60) -> Stats:
        """Live counts and the last ``minutes`` of runs ended per minute: the tenant's, or
        the fleet's (with capacity and workers) for the system admins."""
        response = self._request("GET", "/v1/stats", params={"minutes": minutes})
        return Stats.model_validate(response.json())

    # --- administration ---

    def list_workers(self) -> list[Worker]:
        return [Worker.model_validate(item) for item in self._request("GET", "/v1/workers").json()]

    def drain_worker(self, worker_id: str) -> Worker:
        response = self._request("POST", f"/v1/workers/{worker_id}/drain")
        return Worker.model_validate(response.json())

    def undrain_worker(self, worker_id: str) -> Worker:
        response = self._request("POST", f"/v1/workers/{worker_id}/undrain")
        return Worker.model_validate(response.json())

    def forget_worker(self, worker_id: str) -> Worker:
        response = self._request("POST", f"/v1/workers/{worker_id}/forget")
        return Worker.model_validate(response.json())

    def create_tenant(
        self, name: str, *, weight: int = 1, quotas: dict[str, Any] | None = None
    ) -> Tenant:
        body = drop_none({"name": name, "weight": weight, "quotas": quotas})
        return Tenant.model_validate(self._request("POST", "/v1/tenants", json=body).json())

    def list_tenants(self, **page: Unpack[PageKeywords]) -> Page[Tenant]:
        response = self._request("GET", "/v1/tenants", params=page_params(page))
        return Page[Tenant].model_validate(response.json())

    def get_tenant(self, tenant_id: str) -> Tenant:
        return Tenant.model_validate(self._request("GET", f"/v1/tenants/{tenant_id}").json())

    def find_tenant(self, name_or_id: str) -> Tenant:
        """A tenant by id (``ten_…``) or by name (names need the list: system admins)."""
        if name_or_id.startswith("ten_"):
            return self.get_tenant(name_or_id)
        cursor = None
        while True:
            page = self.list_tenants(limit=1000, cursor=cursor)
            for tenant in page.items:
                if tenant.name == name_or_id:
                    return tenant
            if page.next_cursor is None:
                raise ApiError(404, "Not found", f"no tenant named {name_or_id!r}")
            cursor = page.next_cursor

    def update_tenant(
        self,
        tenant_id: str,
        *,
        weight: int | None = None,
        quotas: dict[str, Any] | None = None,
        default_pool: str | None = None,
        clear_default_pool: bool = False,
    ) -> Tenant:
        """Change the weight, the given quotas (one given as ``None`` is cleared) and the
        default pool (``clear_default_pool``: back to the shared fleet)."""
        body: dict[str, Any] = {"quotas": quotas} if quotas is not None else {}
        if weight is not None:
            body["weight"] = weight
        if default_pool is not None or clear_default_pool:
            body["default_pool"] = default_pool
        response = self._request("PATCH", f"/v1/tenants/{tenant_id}", json=body)
        return Tenant.model_validate(response.json())

    def create_api_key(self, tenant_id: str, *, role: str = "developer", name: str = "key") -> str:
        response = self._request(
            "POST", f"/v1/tenants/{tenant_id}/keys", json={"role": role, "name": name}
        )
        token: str = response.json()["token"]
        return token

    def create_worker_token(self, name: str = "worker") -> str:
        token: str = self._request("POST", "/v1/worker-tokens", params={"name": name}).json()[
            "token"
        ]
        return token

    # --- definitions (herder apply) ---

    def get_artifact(self, sha256: str) -> Artifact | None:
        """The tenant's artifact with this content, or None if it has none: upload it then."""
        try:
            response = self._request("GET", f"/v1/artifacts/{sha256}")
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return Artifact.model_validate(response.json())
