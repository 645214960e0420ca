"""The API in-process (ASGI) over a fresh store, with an admin and a second tenant."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from herder.api.app import create_app
from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.domain.models import Role
from herder.settings import Settings
from herder.store.store import Store


@dataclass
class Api:
    """An HTTP client per identity, all against one app."""

    http: TestClient
    store: Store
    admin_key: str
    worker_token: str
    tenant_id: str

    def as_key(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    @property
    def admin(self) -> dict[str, str]:
        return self.as_key(self.admin_key)

    @property
    def worker(self) -> dict[str, str]:
        return self.as_key(self.worker_token)

    def other_tenant_key(self, name: str = "other", role: Role = Role.ADMIN) -> str:
        tenant = self.store.access.create_tenant(name)
        return self.store.access.create_api_key(tenant.id, role, "test")[1]

    def register_worker(self, cpu: float = 2, memory_mb: int = 2048, slots: int = 10) -> str:
        response = self.http.post(
            "/v1/workers",
            headers=self.worker,
            json={
                "name": "test-worker",
                "capacity": {"cpu": cpu, "memory_mb": memory_mb, "gpus": 0},
                "max_slots": slots,
            },
        )
        assert response.status_code == 201, response.text
        worker_id: str = response.json()["worker_id"]
        return worker_id

    def create_job(self, name: str = "hello", **spec: object) -> dict[str, Any]:
        body = {"name": name, "runtime": "shell", "command": "echo hello", **spec}
        response = self.http.post("/v1/jobs", headers=self.admin, json=body)
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job

    def start_run(self, job_id: object, **body: object) -> dict[str, Any]:
        response = self.http.post(f"/v1/jobs/{job_id}/runs", headers=self.admin, json=body)
        assert response.status_code == 201, response.text
        run: dict[str, Any] = response.json()
        return run


@pytest.fixture
def api(store: Store, tmp_path: Path) -> Iterator[Api]:
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    settings = Settings(home=tmp_path, database_url=store.database.url)
    with TestClient(create_app(store, settings)) as http:
        yield Api(
            http=http,
            store=store,
            admin_key=bootstrap.admin_key,
            worker_token=bootstrap.worker_token,
            tenant_id=bootstrap.tenant.id,
        )


Herder = Callable[..., Result]


@pytest.fixture
def herder(api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Herder:
    """Runs ``herder ARGS…`` as the system admin (or as ``key``) and returns the result."""
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_URL", "http://testserver")
    monkeypatch.setattr(common.out, "width", 250)  # long ids stay on one line
    monkeypatch.setattr(common.err, "width", 250)  # and long paths (xdist's tmp_path)

    def run(*args: str, key: str | None = None) -> Result:
        monkeypatch.setenv("HERDER_API_KEY", key or api.admin_key)

        def connect(url: str, api_key: str, **options: Any) -> HerderClient:
            return HerderClient(url, api_key, http=api.http, **options)

        monkeypatch.setattr(common, "HerderClient", connect)
        return CliRunner().invoke(app, list(args))

    return run
