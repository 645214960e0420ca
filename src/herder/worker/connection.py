"""The worker's side of the worker protocol: typed calls over one HTTP connection pool.

The fleet's worker token is sent only to register; every later call presents the secret the
registration answered with, kept in memory only (never on disk, in argv or in an attempt's
environment). A worker that registered again keeps its old secrets, to report its old
attempts under the ids they were given to.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

import httpx

from herder import __version__
from herder.domain.jobs import Capacity
from herder.domain.models import Assignment
from herder.worker.output import Chunk

CLAIM_WAIT_SECONDS = 20.0
DIRECTIVES = ("cancel", "drop", "preempt")
GONE = 410  # the server declared this worker lost: drop everything, register again
UNKNOWN = 401  # the server does not know this worker's secret (say, an older registration)


@dataclass(frozen=True)
class Registration:
    worker_id: str
    heartbeat_interval_seconds: float
    heartbeat_timeout_seconds: float


def is_gone(error: httpx.HTTPError) -> bool:
    """The registration is over: the worker must drop its attempts and register again."""
    return isinstance(error, httpx.HTTPStatusError) and error.response.status_code in (
        GONE,
        UNKNOWN,
    )


class ServerConnection:
    def __init__(
        self, server_url: str, token: str, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._token = token
        self._secrets: dict[str, str] = {}  # worker id → its secret, in memory only
        self._http = httpx.AsyncClient(
            transport=transport,
            base_url=server_url.rstrip("/"),
            timeout=httpx.Timeout(10.0, read=CLAIM_WAIT_SECONDS + 10.0),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
        )
        self.worker_id = ""
        self.last_contact = time.monotonic()  # when the server last answered at all

    async def close(self) -> None:
        await self._http.aclose()

    def _as(self, worker_id: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secrets.get(worker_id, '')}"}

    async def _post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        response = await self._http.post(path, json=body, headers=headers)
        if response.status_code < 500:
            self.last_contact = time.monotonic()
        response.raise_for_status()
        return response.json()

    async def register(
        self,
        name: str,
        capacity: Capacity,
        max_slots: int,
        labels: dict[str, str],
        address: str,
    ) -> Registration:
        """Register as a new worker (a lost one registers again, under a new id); ``address``
        is where gang peers reach it."""
        answer = await self._post(
            "/v1/workers",
            {
                "name": name,
                "capacity": capacity.model_dump(),
                "max_slots": max_slots,
                "labels": labels,
                "version": __version__,
                "address": address,
            },
            {"Authorization": f"Bearer {self._token}"},
        )
        self.worker_id = answer["worker_id"]
        self._secrets[self.worker_id] = answer["worker_secret"]
        return Registration(
            worker_id=self.worker_id,
            heartbeat_interval_seconds=float(answer["heartbeat_interval_seconds"]),
            heartbeat_timeout_seconds=float(answer["heartbeat_timeout_seconds"]),
        )

    async def heartbeat(
        self, running: list[tuple[str, int]], finished: list[tuple[str, int]]
    ) -> dict[str, list[str]]:
        """``finished``: attempts that ended but whose report has not been delivered yet (the
        server must not take them for attempts that never reached us)."""
        answer = await self._post(
            f"/v1/workers/{self.worker_id}/heartbeat",
            {"running": _running(running), "finished": _running(finished)},
            self._as(self.worker_id),
        )
        return _directives(answer)

    async def claim(
        self, max_runs: int, running: list[tuple[str, int]]
    ) -> tuple[list[Assignment], dict[str, list[str]]]:
        answer = await self._post(
            f"/v1/workers/{self.worker_id}/claim",
            {
                "max_runs": max_runs,
                "wait_seconds": CLAIM_WAIT_SECONDS,
                "running": _running(running),
            },
            self._as(self.worker_id),
        )
        assignments = [Assignment.model_validate(item) for item in answer["assignments"]]
        return assignments, _directives(answer)

    async def report(
        self,
        worker_id: str,
        logs: list[tuple[str, int, Chunk]],
        completions: list[dict[str, Any]],
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
        answer = await self._post(f"/v1/workers/{worker_id}/reports", body, self._as(worker_id))
        results: list[dict[str, Any]] = answer["results"]
        return results

    async def download(self, sha256: str) -> bytes:
        response = await self._http.get(
            f"/v1/workers/{self.worker_id}/artifacts/{sha256}", headers=self._as(self.worker_id)
        )
        response.raise_for_status()
        return response.content


def _directives(answer: dict[str, Any]) -> dict[str, list[str]]:
    """What the server tells us to stop: cancel, drop and (newer servers) preempt."""
    return {kind: list(answer.get(kind, [])) for kind in DIRECTIVES}


def _running(attempts: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"attempt_id": attempt_id, "attempt": number} for attempt_id, number in attempts]
