"""``HerderClient``: one HTTP connection with the key, errors mapped, and the calls on
artifacts, jobs, the queue, stats, workers and tenants; the other groups of calls (runs and
their logs among them) are mixed in from their modules."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Self, Unpack

import httpx

from herder.client.admin import AdminCalls
from herder.client.alerts import AlertCalls
from herder.client.cells import AnsweringCell, CellCalls
from herder.client.errors import ApiError, ServerUnreachable
from herder.client.events import EventCalls
from herder.client.limits import LimitCalls
from herder.client.pages import CursorKeywords, PageKeywords, page_params
from herder.client.pools import PoolCalls
from herder.client.retries import Call, Retries, may_repeat
from herder.client.runs import RunCalls
from herder.client.schedules import ScheduleCalls, drop_none
from herder.client.secrets import SecretCalls
from herder.client.uploads import MultipartUpload, UploadProgress
from herder.client.usage import UsageCalls
from herder.client.workflows import WorkflowCalls
from herder.domain.models import (
    Artifact,
    Job,
    Page,
    QueueEntry,
    Tenant,
    Worker,
)
from herder.domain.stats import Stats
from herder.tls import client_context

# An idle connection is dropped well before the server closes it (``http_head``'s
# ``SERVER_KEEP_ALIVE_SECONDS``): a request is never sent on one the server is closing.
KEEP_ALIVE_SECONDS = 4.0


class HerderClient(
    RunCalls,
    ScheduleCalls,
    WorkflowCalls,
    AlertCalls,
    AdminCalls,
    SecretCalls,
    PoolCalls,
    LimitCalls,
    UsageCalls,
    EventCalls,
    CellCalls,
):
    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
        retries: Retries = Retries(),
        ca_file: Path | None = None,
    ) -> None:
        """``http``: an HTTP client to send through instead of a new one (say, an in-process
        app's test client); it stays open when this client closes. ``retries``: how long a
        call safe to repeat is tried again while the server is lost for a moment. ``ca_file``:
        the authority that signed an HTTPS server's certificate, when not the system's."""
        self.url = url.rstrip("/")
        self._retries = retries
        self._answered = False  # no answer yet: a refused connection fails at once
        # the cell the last answer came from, when through an edge (``CellCalls``)
        self.answered_by: AnsweringCell | None = None
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self._owns_http = http is None
        self._http = http or httpx.Client(
            base_url=self.url,
            timeout=timeout,
            limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_SECONDS),
            verify=True if ca_file is None else client_context(ca_file),
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

    def _request(
        self, method: str, path: str, *, repeatable: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """One call, tried again while the server is lost for a moment and the call is safe
        to repeat (``retries``; ``repeatable``: it is, whatever its method, say a batch whose
        every run has a key); an error status raised as ``ApiError``."""
        headers = {**self._auth, **kwargs.pop("headers", {})}
        content = kwargs.get("content")
        call = Call(
            repeatable=repeatable or may_repeat(method, headers),
            replayable=content is None or isinstance(content, bytes | str),
            answered_before=self._answered,
        )
        outcome = self._retries.send(
            lambda: self._http.request(method, path, headers=headers, **kwargs), call
        )
        if isinstance(outcome, httpx.TransportError):
            raise ServerUnreachable(
                f"cannot reach the Herder server at {self.url}: {outcome}"
            ) from outcome
        self._answered = True
        if isinstance(outcome, ApiError):
            raise outcome
        self.answered_by = AnsweringCell.of(outcome.headers)
        return outcome

    def whoami(self) -> dict[str, Any]:
        """Who this client acts as (``GET /auth/session``): a signed-in person or a key."""
        document: dict[str, Any] = self._request("GET", "/auth/session").json()
        return document

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
        created_by: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Job]:
        """``created_by``: ``me`` or an actor (``user:key_…``): only the jobs it made."""
        params = page_params(page) | drop_none({"name": name, "created_by": created_by})
        params["label"] = [f"{key}={value}" for key, value in (labels or {}).items()]
        response = self._request("GET", "/v1/jobs", params=params)
        return Page[Job].model_validate(response.json())

    def update_job(self, job_id: str, changes: dict[str, Any]) -> Job:
        return Job.model_validate(self._request("PATCH", f"/v1/jobs/{job_id}", json=changes).json())

    def delete_job(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}")

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
