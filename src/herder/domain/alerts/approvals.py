"""``approval_waiting``: a workflow's approval task waiting for a person — one incident per
waiting task (keyed by its run), opened once it has waited ``after_seconds``, resolved when
it is decided, times out or is cancelled."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from herder.domain.alerts.decisions import Signal


@dataclass(frozen=True)
class WaitingApproval:
    run_id: str
    task: str
    workflow_run_id: str
    workflow_name: str
    waited_seconds: float


def approval_waiting(waiting: Sequence[WaitingApproval], gone: Collection[str]) -> list[Signal]:
    """Fires for each approval waiting (already past ``after_seconds``: the reader's filter);
    clears for an open one no longer waiting (``gone``)."""
    signals = [Signal(run_id, False, f"approval {run_id} decided") for run_id in sorted(gone)]
    for one in waiting:
        summary = (
            f"workflow run {one.workflow_run_id} of {one.workflow_name} waits for a decision on "
            f"task {one.task} ({round(one.waited_seconds / 60)} min): approve or reject it"
        )
        details = {"workflow_run_id": one.workflow_run_id, "task": one.task}
        signals.append(Signal(one.run_id, True, summary, details))
    return signals
