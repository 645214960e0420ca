"""Registering workers by hand: each registration's secret, for the calls made as it."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api

_secrets: dict[str, str] = {}  # worker id → the secret its registration answered with


def register_worker(
    api: Api, name: str = "test-worker", *, cpu: float = 2, memory_mb: int = 2048, **body: Any
) -> str:
    """A new worker (registered with the fleet's worker token), remembered with its secret."""
    response = api.http.post(
        "/v1/workers",
        headers=api.worker,
        json={
            "name": name,
            "capacity": {"cpu": cpu, "memory_mb": memory_mb, "gpus": 0},
            "max_slots": 10,
            **body,
        },
    )
    assert response.status_code == 201, response.text
    worker_id: str = response.json()["worker_id"]
    _secrets[worker_id] = response.json()["worker_secret"]
    return worker_id


def as_worker(worker_id: str) -> dict[str, str]:
    """The headers of calls made as this registered worker."""
    return {"Authorization": f"Bearer {_secrets[worker_id]}"}
