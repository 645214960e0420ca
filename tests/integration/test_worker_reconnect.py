"""The agent's side of worker trust and of outages: the fleet token is sent only to
register, and an attempt that ended while the server was away is named in every heartbeat
until its report is delivered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from herder.worker.agent import Agent
from tests.integration.test_worker_agent import (
    FakeServer,
    assignment,
    config,
    until,
    with_agent,
)


class FlakyReports(FakeServer):
    """Refuses every report (503, as a proxy in front of a restarting server would) until
    ``reports_open``; records the heartbeats."""

    def __init__(self) -> None:
        super().__init__()
        self.reports_open = False
        self.heartbeats: list[dict[str, Any]] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/heartbeat"):
            self.heartbeats.append(json.loads(request.content))
        if request.url.path.endswith("/reports") and not self.reports_open:
            return httpx.Response(503, json={"detail": "restarting"})
        return await super().handle(request)


def test_the_fleet_token_only_registers_and_the_secret_does_the_rest(tmp_path: Path) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_1", "echo hi")]

    async def reported(_: Agent) -> None:
        await until(lambda: "att_1" in server.completions)
        await until(lambda: any(path.endswith("/heartbeat") for path, _ in server.credentials))

    with_agent(server, config(tmp_path), reported)
    register, *later = server.credentials
    assert register == ("/v1/workers", "Bearer worker-token")
    assert {path.rsplit("/", 1)[1] for path, _ in later} >= {"claim", "reports", "heartbeat"}
    assert {header for _, header in later} == {"Bearer wks_fake-secret"}


def test_a_finished_attempt_is_named_in_heartbeats_until_its_report_arrives(
    tmp_path: Path,
) -> None:
    server = FlakyReports()
    server.to_assign = [assignment("att_done", "true")]

    def named_finished() -> bool:
        return any(
            beat["finished"] == [{"attempt_id": "att_done", "attempt": 1}] and not beat["running"]
            for beat in server.heartbeats
        )

    async def outage_then_back(_: Agent) -> None:
        await until(named_finished)  # ended, unreported: the heartbeat says so
        assert "att_done" not in server.completions
        server.reports_open = True
        await until(lambda: "att_done" in server.completions)
        seen = len(server.heartbeats)
        await until(lambda: len(server.heartbeats) > seen + 1)
        assert server.heartbeats[-1]["finished"] == []  # delivered: no longer named

    with_agent(server, config(tmp_path), outage_then_back)
    assert server.completions["att_done"]["outcome"] == "succeeded"
