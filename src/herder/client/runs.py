"""The client's run calls (mixed into ``HerderClient``): start one or many, read, list,
cancel, suspend, resume, reprioritise and rerun them, their checkpoints and their logs, and
wait for one to end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

import httpx
from pydantic import BaseModel

from herder.api.schemas import MAX_BATCH_RUNS, RunBatchResult
from herder.client.errors import ApiError
from herder.client.pages import PageKeywords, page_params
from herder.client.schedules import drop_none
from herder.domain.jobs import Priority
from herder.domain.models import CheckpointInfo, LogChunk, Page, Run, RunDetail, RunEvent

POLL_BACK_OFF = 1.5  # each pause of ``wait`` half again as long as the last, to its ceiling


class Logs(BaseModel):
    attempt: int | None
    chunks: list[LogChunk]
    next_after: int
    complete: bool


class RunCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

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
        created_by: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[Run]:
        """``created_by``: ``me`` or an actor (``user:key_…``, ``schedule:sch_…``)."""
        params = drop_none(
            {
                "job_id": job_id,
                "schedule_id": schedule_id,
                "created_by": created_by,
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
        ``idempotency_key``; every run is answered on its own (see ``Submission``). A batch
        whose every run has a key is sent again while the server is lost for a moment."""
        keyed = all(run.get("idempotency_key") for run in runs)
        response = self._request(
            "POST", "/v1/runs/batch", json={"runs": list(runs)}, repeatable=keyed
        )
        return RunBatchResult.model_validate(response.json())

    def start_runs(
        self,
        job_id: str,
        count: int,
        *,
        params: Mapping[str, Any] | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        idempotency_prefix: str | None = None,
    ) -> list[str]:
        """``count`` runs of the job, in batches of 1,000; their ids in order. Raises the
        first run's problem if any was refused. With ``idempotency_prefix`` the runs' keys
        are it, a dash and their index: sent again, the same call starts no second run."""
        overrides = {"params": dict(params) if params else None, "args": args, "env": env}
        item = {"job_id": job_id, **drop_none(overrides)}
        run_ids: list[str] = []
        for start in range(0, count, MAX_BATCH_RUNS):
            indexes = range(start, min(start + MAX_BATCH_RUNS, count))
            keys = [
                f"{idempotency_prefix}-{index}" if idempotency_prefix else None for index in indexes
            ]
            result = self.submit_runs([drop_none({**item, "idempotency_key": key}) for key in keys])
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
