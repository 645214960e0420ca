"""The worker agent end to end against a scripted server: real attempts, real processes.

The server is a fake speaking the worker protocol (register, claim, heartbeat, report), so
these tests can say exactly what the server asks (GPUs, a gang, a preemption) and check what
the worker does and reports.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from herder.domain.jobs import JobSpec, Resources, Runtime
from herder.domain.models import Assignment
from herder.domain.retry import OOM_REASON_PREFIX
from herder.worker.address import local_address
from herder.worker.agent import PREEMPTED_REASON, WORKER_STOPPED_REASON, Agent, WorkerConfig
from herder.worker.cgroups import CgroupEnforcer
from herder.worker.isolation import Isolation
from herder.worker.uids import default_python
from herder.worker.workspace import memory_workspace_root

SERVER_URL = "http://127.0.0.1:9"  # never dialled: the transport is the fake
PYTHON = default_python()
HEARTBEAT_SECONDS = 0.2
ALL_DIRECTIVES = ("cancel", "drop", "preempt")


class FakeServer:
    """Hands out the assignments and directives a test queues; records what comes back."""

    def __init__(self) -> None:
        self.registrations: list[dict[str, Any]] = []
        self.to_assign: list[Assignment] = []
        self.on_claim: dict[str, list[str]] = defaultdict(list)
        self.on_heartbeat: dict[str, list[str]] = defaultdict(list)
        self.output: dict[str, bytearray] = defaultdict(bytearray)
        self.completions: dict[str, dict[str, Any]] = {}
        self.credentials: list[tuple[str, str]] = []  # (path, Authorization) of each call
        self.leaving: list[str] = []  # the calls that said the worker is stopping
        self.poll_seconds = 0.05  # how long a claim with nothing to hand over waits, at most
        self.on_leaving: list[Assignment] = []  # placed before a leaving claim: handed to it
        self.hands_over_in_reports = False  # as its registration says
        self.in_report_reply: list[Assignment] = []  # handed over in the next report's reply
        self.rooms: list[int | None] = []  # what each report with completions asked for

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        path = request.url.path
        self.credentials.append((path, request.headers.get("authorization", "")))
        if body.get("leaving"):
            self.leaving.append(path.rsplit("/", 1)[1])
        if path == "/v1/workers":
            self.registrations.append(body)
            return httpx.Response(
                200,
                json={
                    "worker_id": "wrk_fake",
                    "worker_secret": "wks_fake-secret",
                    "heartbeat_interval_seconds": HEARTBEAT_SECONDS,
                    "heartbeat_timeout_seconds": 60,
                    **({"hands_over_in_reports": True} if self.hands_over_in_reports else {}),
                },
            )
        if path.endswith("/claim"):
            if body.get("leaving"):
                self.to_assign += self.on_leaving
                self.on_leaving = []
            if not self.to_assign and not any(self.on_claim.values()):
                await asyncio.sleep(min(self.poll_seconds, body["wait_seconds"]))  # a long-poll
            assignments, self.to_assign = self.to_assign, []
            return httpx.Response(
                200,
                json={
                    "assignments": [item.model_dump(mode="json") for item in assignments],
                    **self._take(self.on_claim),
                },
            )
        if path.endswith("/heartbeat"):
            return httpx.Response(200, json=self._take(self.on_heartbeat))
        if path.endswith("/reports"):
            for log in body["logs"]:
                self.output[log["attempt_id"]] += base64.b64decode(log["data_b64"])
            results = []
            for completion in body["completions"]:
                self.completions[completion["attempt_id"]] = completion
                results.append(
                    {"attempt_id": completion["attempt_id"], "status": 200, "detail": "stored"}
                )
            if body["completions"]:
                self.rooms.append(body.get("room"))
            handed: list[Assignment] = []
            if body.get("room"):  # as a real server: only when the report asks for room
                handed, self.in_report_reply = self.in_report_reply, []
            handed_over = [item.model_dump(mode="json") for item in handed]
            return httpx.Response(200, json={"results": results, "assignments": handed_over})
        return httpx.Response(404, json={"detail": f"no {path} here"})

    @staticmethod
    def _take(directives: dict[str, list[str]]) -> dict[str, list[str]]:
        taken = {kind: list(directives[kind]) for kind in ALL_DIRECTIVES}
        directives.clear()
        return taken

    def text(self, attempt_id: str) -> str:
        return self.output[attempt_id].decode()


def assignment(attempt_id: str, command: str, **fields: Any) -> Assignment:
    spec = fields.pop("spec", {})
    return Assignment(
        attempt_id=attempt_id,
        attempt=1,
        run_id=f"run_{attempt_id}",
        tenant_id="ten_fake",
        idempotency_key=None,
        spec=JobSpec(runtime=Runtime.SHELL, command=command, **spec),
        **fields,
    )


def config(tmp_path: Path, **changes: Any) -> WorkerConfig:
    settings: dict[str, Any] = {
        "server_url": SERVER_URL,
        "token": "worker-token",
        "name": "fake-host",
        "capacity": Resources(cpu=2, memory_mb=2048),
        "home": tmp_path / "worker",
        "python": PYTHON,
        "run_uid_base": 300000,
        "run_uid_count": 16,
        "max_stop_grace_seconds": 0.5,
        **changes,
    }
    return WorkerConfig(**settings)


async def until(check: Callable[[], bool], within: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def with_agent(
    server: FakeServer, settings: WorkerConfig, scenario: Callable[[Agent], Awaitable[None]]
) -> None:
    """Run an agent against ``server`` while ``scenario`` plays, then stop it."""

    async def main() -> None:
        stop = asyncio.Event()
        agent = Agent(settings, httpx.MockTransport(server.handle))
        running = asyncio.create_task(agent.run(stop))
        try:
            async with asyncio.timeout(30):
                await scenario(agent)
        finally:
            stop.set()
            await running

    asyncio.run(main())


def test_registration_carries_the_address_and_labels_with_its_isolation(tmp_path: Path) -> None:
    server = FakeServer()

    def registered(count: int) -> Callable[[Agent], Awaitable[None]]:
        async def until_registered(_: Agent) -> None:
            await until(lambda: len(server.registrations) == count)

        return until_registered

    labels = {"gpu_model": "h100", "zone": "b"}
    with_agent(server, config(tmp_path, labels=labels), registered(1))
    with_agent(server, config(tmp_path, address="10.1.2.3"), registered(2))
    detected, given = server.registrations
    isolation = config(tmp_path).isolation.value
    assert detected["address"] == local_address(SERVER_URL)
    assert detected["labels"] == {**labels, "isolation": isolation}  # image jobs need sandbox
    assert detected["address"] == "127.0.0.1"  # the interface towards this server
    assert given["address"] == "10.1.2.3"


def test_an_attempt_sees_its_gpus_and_its_gang(tmp_path: Path) -> None:
    server = FakeServer()
    show = 'echo "${CUDA_VISIBLE_DEVICES-unset}|$HERDER_RANK|$HERDER_WORLD_SIZE|$HERDER_PEERS"'
    peers = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    server.to_assign = [
        assignment("att_gang", show, gpu_indices=[1, 3], rank=2, world_size=3, peers=peers),
        # no GPU given: none visible, even when the job's own env names some
        assignment("att_cpu", show, spec={"env": {"CUDA_VISIBLE_DEVICES": "0,1"}}),
    ]

    async def both_done(_: Agent) -> None:
        await until(lambda: len(server.completions) == 2)

    with_agent(server, config(tmp_path), both_done)
    assert server.text("att_gang") == "1,3|2|3|10.0.0.1,10.0.0.2,10.0.0.3\n"
    assert server.text("att_cpu") == "|0|1|\n"


def test_preemption_from_a_heartbeat_or_a_claim_is_reported_apart_from_a_cancel(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    stubborn = "trap '' TERM; echo started; sleep 30"
    ids = ["att_heartbeat", "att_claim", "att_cancel"]
    server.to_assign = [
        assignment("att_heartbeat", stubborn),
        assignment("att_claim", stubborn),
        assignment("att_cancel", "echo started; sleep 30"),
    ]

    async def stop_them(_: Agent) -> None:
        await until(lambda: all(server.text(key) == "started\n" for key in ids))
        server.on_heartbeat["preempt"].append("att_heartbeat")
        server.on_claim["preempt"].append("att_claim")
        server.on_claim["cancel"].append("att_cancel")
        await until(lambda: len(server.completions) == 3)

    with_agent(server, config(tmp_path), stop_them)
    ended = {key: (c["outcome"], c["reason"]) for key, c in server.completions.items()}
    preempted = ("preempted", f"{PREEMPTED_REASON} (SIGTERM, then SIGKILL after 0.5s grace)")
    assert ended == {
        "att_heartbeat": preempted,
        "att_claim": preempted,
        "att_cancel": ("cancelled", "cancelled (SIGTERM)"),
    }


def test_an_attempt_handed_over_again_runs_once(tmp_path: Path) -> None:
    """A claim's answer late enough that the server, not hearing of the attempt, handed it
    over again: the worker already runs it and does not start it twice."""
    server = FakeServer()
    twice = assignment("att_twice", "echo started; sleep 0.5")
    server.to_assign = [twice]

    async def handed_over_again(_: Agent) -> None:
        await until(lambda: server.text("att_twice") == "started\n")
        server.to_assign = [twice]
        await until(lambda: not server.to_assign)  # the next claim took it
        await until(lambda: len(server.completions) == 1)
        await asyncio.sleep(HEARTBEAT_SECONDS)  # a second start would have begun by now

    with_agent(server, config(tmp_path), handed_over_again)
    assert server.completions["att_twice"]["outcome"] == "succeeded"
    assert server.text("att_twice") == "started\n"


def test_the_next_attempt_handed_over_in_a_reports_reply_runs(tmp_path: Path) -> None:
    """A server that says so may answer a report with attempts placed on the worker (the
    next task of a workflow): the report asked for the room it had, and they run."""
    server = FakeServer()
    server.hands_over_in_reports = True
    server.to_assign = [assignment("att_first", "echo first")]
    server.in_report_reply = [assignment("att_next", "echo next")]

    async def chained(_: Agent) -> None:
        await until(lambda: "att_next" in server.completions)

    with_agent(server, config(tmp_path, max_slots=4), chained)
    assert server.text("att_next") == "next\n"
    assert server.completions["att_next"]["outcome"] == "succeeded"
    assert server.rooms[0] == 4, server.rooms  # its one attempt had ended: every slot free


def test_a_worker_asks_no_room_of_a_server_that_does_not_hand_over_in_reports(
    tmp_path: Path,
) -> None:
    """A server of the release before refuses an unknown field: the report leaves it out."""
    server = FakeServer()
    server.to_assign = [assignment("att_first", "echo first")]

    async def reported(_: Agent) -> None:
        await until(lambda: "att_first" in server.completions)

    with_agent(server, config(tmp_path), reported)
    assert server.rooms == [None], server.rooms


def test_an_attempt_handed_over_again_after_its_report_was_delivered_does_not_run_again(
    tmp_path: Path,
) -> None:
    """The server's heartbeat check raced the claim that handed the attempt over, and handed
    it over again; the attempt ended and its report was delivered before that claim's answer
    came: the worker, which no longer holds it, still does not start it a second time."""
    server = FakeServer()
    once = assignment("att_once", "echo started")
    server.to_assign = [once]

    async def handed_over_after_its_end(agent: Agent) -> None:
        await until(lambda: len(server.completions) == 1)
        await until(lambda: not agent.reporter.unreported("wrk_fake"))
        server.to_assign = [once]
        await until(lambda: not server.to_assign)  # the next claim took it
        await asyncio.sleep(HEARTBEAT_SECONDS)  # a second run would have printed by now

    with_agent(server, config(tmp_path), handed_over_after_its_end)
    assert server.text("att_once") == "started\n"


def test_the_memory_request_is_enforced(tmp_path: Path) -> None:
    server = FakeServer()
    allocate = f'{PYTHON} -c \'data = b"x" * ({{}} * 1024 * 1024); print("allocated")\''
    server.to_assign = [
        assignment("att_greedy", allocate.format(400), spec={"resources": {"memory_mb": 100}}),
        assignment("att_modest", allocate.format(40), spec={"resources": {"memory_mb": 100}}),
    ]
    in_cgroups = []

    async def both_done(agent: Agent) -> None:
        in_cgroups.append(isinstance(agent.host.enforcer, CgroupEnforcer))
        await until(lambda: len(server.completions) == 2)

    with_agent(server, config(tmp_path), both_done)
    greedy, modest = server.completions["att_greedy"], server.completions["att_modest"]
    assert (modest["outcome"], server.text("att_modest")) == ("succeeded", "allocated\n")
    assert greedy["outcome"] == "failed"
    assert "allocated" not in server.text("att_greedy")
    if in_cgroups[0]:
        assert greedy["reason"].startswith(f"{OOM_REASON_PREFIX}: "), greedy["reason"]
        assert "100 MiB memory limit" in greedy["reason"]
        assert 40 * 1024 <= modest["usage"]["max_rss_kb"] < 100 * 1024
    else:
        assert "MemoryError" in server.text("att_greedy")


def test_a_worker_at_isolation_none_runs_attempts_as_its_own_user(tmp_path: Path) -> None:
    """No uid switch, no namespaces, no limits of its own: the job is a plain child of the
    worker, in the worker's cgroups, but for its keeper's CPU account where the worker may
    make one (in one hierarchy: v1's cpuacct, else v2's)."""
    server = FakeServer()
    command = 'id -u; echo "$HOME" "$TMPDIR"; pwd; cat /proc/self/cgroup'
    server.to_assign = [assignment("att_plain", command)]

    async def done(_: Agent) -> None:
        await until(lambda: len(server.completions) == 1)

    with_agent(server, config(tmp_path, isolation=Isolation.NONE), done)
    user, environment, directory, *cgroups = server.text("att_plain").splitlines()
    own = Path("/proc/self/cgroup").read_text().splitlines()
    moved = [(mine, job) for mine, job in zip(own, cgroups, strict=True) if mine != job]
    assert len(moved) <= 1, moved
    for mine, job in moved:
        hierarchy, controllers, _ = mine.split(":", 2)
        assert controllers in ("cpuacct", "cpu,cpuacct", ""), moved
        assert re.fullmatch(rf"{hierarchy}:{controllers}:.*-cpu/keeper-\d+", job), moved
    workspace = memory_workspace_root(tmp_path / "worker" / "worker-300000") / "att_plain"
    assert user == str(os.geteuid())
    assert environment == f"{workspace} {workspace}"
    assert directory == str(workspace)
    assert not workspace.exists()  # removed when the attempt ended


def test_a_stopped_worker_says_it_is_leaving_and_lets_what_runs_end_within_its_drain(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_short", "echo started; sleep 0.5; echo done")]

    async def started(_: Agent) -> None:
        await until(lambda: "started" in server.text("att_short"))
        assert not server.leaving, "it said it was leaving before it was stopped"

    with_agent(server, config(tmp_path, drain_seconds=30), started)
    assert server.completions["att_short"]["outcome"] == "succeeded"
    assert server.text("att_short") == "started\ndone\n"
    assert server.leaving[0] == "heartbeat", "the server hears it at once, not at a next beat"


def test_what_outlives_the_drain_is_stopped_as_a_preemption_its_run_queued_again(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_long", "echo started; sleep 30")]

    async def started(_: Agent) -> None:
        await until(lambda: "started" in server.text("att_long"))

    with_agent(server, config(tmp_path, drain_seconds=0.3), started)
    ended = server.completions["att_long"]
    assert (ended["outcome"], ended["reason"]) == (
        "preempted",
        f"{WORKER_STOPPED_REASON} after a 0.3s drain (SIGTERM)",
    )


def test_what_was_placed_but_not_handed_over_when_it_stops_runs_in_the_drain(
    tmp_path: Path,
) -> None:
    """Placed here just before the server heard that the worker leaves, and not claimed yet
    (its long-poll is slow): the worker takes it with a claim that does not wait, and runs
    it, rather than leave it to be lost with the worker."""
    server = FakeServer()
    server.poll_seconds = 5.0
    server.on_leaving = [assignment("att_late", "echo late")]

    async def idle(_: Agent) -> None:
        await until(lambda: len(server.registrations) == 1)

    with_agent(server, config(tmp_path, drain_seconds=5.0), idle)
    assert server.completions["att_late"]["outcome"] == "succeeded"
    assert server.text("att_late") == "late\n"


def test_a_second_signal_stops_what_runs_without_waiting_out_the_drain(tmp_path: Path) -> None:
    server = FakeServer()
    server.to_assign = [assignment("att_long", "echo started; sleep 30")]

    async def main() -> float:
        stop = asyncio.Event()
        agent = Agent(config(tmp_path, drain_seconds=60), httpx.MockTransport(server.handle))
        running = asyncio.create_task(agent.run(stop))
        await until(lambda: "started" in server.text("att_long"))
        stop.set()
        await until(lambda: bool(server.leaving))
        hurried = asyncio.get_running_loop().time()
        agent.hurry()
        async with asyncio.timeout(30):
            await running
        return asyncio.get_running_loop().time() - hurried

    took = asyncio.run(main())
    ended = server.completions["att_long"]
    assert (ended["outcome"], ended["reason"]) == (
        "preempted",
        f"{WORKER_STOPPED_REASON} (SIGTERM)",
    )
    assert took < 30, f"it waited {took:.1f}s after the second signal"
