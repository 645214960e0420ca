"""The worker's side of the worker protocol: typed calls over one HTTP connection pool."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from herder import __version__
from herder.domain.jobs import Resources
from herder.domain.models import Assignment
from herder.worker.output import Chunk

CLAIM_WAIT_SECONDS = 20.0


class ServerConnection:
    def __init__(self, server_url: str, token: str) -> None:
        self._http = httpx.AsyncClient(
            base_url=server_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(10.0, read=CLAIM_WAIT_SECONDS + 10.0),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
        )
        self.worker_id = ""

    async def close(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self._http.post(path, json=body)
        response.raise_for_status()
        return response.json()

    async def register(
        self, name: str, capacity: Resources, max_slots: int, labels: dict[str, str]
    ) -> float:
        """Register; returns the heartbeat interval the server asks for."""
        answer = await self._post(
            "/v1/workers",
            {
                "name": name,
                "capacity": capacity.model_dump(),
                "max_slots": max_slots,
                "labels": labels,
                "version": __version__,
            },
        )
        self.worker_id = answer["worker_id"]
        return float(answer["heartbeat_interval_seconds"])

    async def heartbeat(self, running: list[str]) -> dict[str, list[str]]:
        answer: dict[str, list[str]] = await self._post(
            f"/v1/workers/{self.worker_id}/heartbeat", {"running": running}
        )
        return answer

    async def claim(
        self, max_runs: int, running: list[str]
    ) -> tuple[list[Assignment], dict[str, list[str]]]:
        answer = await self._post(
            f"/v1/workers/{self.worker_id}/claim",
            {"max_runs": max_runs, "wait_seconds": CLAIM_WAIT_SECONDS, "running": running},
        )
        assignments = [Assignment.model_validate(item) for item in answer["assignments"]]
        return assignments, {"cancel": answer["cancel"], "drop": answer["drop"]}

    async def report(
        self, logs: list[tuple[str, int, Chunk]], completions: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        body = {
            "logs": [
                {
                    "attempt_id": attempt_id,
                    "attempt": attempt,
                    "seq": chunk.seq,
                    "stream": chunk.stream,
                    "data_b64": base64.b64encode(chunk.data).decode(),
                }
                for attempt_id, attempt, chunk in logs
            ],
            "completions": completions,
        }
        answer = await self._post(f"/v1/workers/{self.worker_id}/reports", body)
        results: list[dict[str, Any]] = answer["results"]
        return results

    async def download(self, sha256: str) -> bytes:
        response = await self._http.get(f"/v1/workers/{self.worker_id}/artifacts/{sha256}")
        response.raise_for_status()
        return response.content
