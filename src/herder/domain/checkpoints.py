"""A run's checkpoint: who may save it, and how long it outlives its run (docs/checkpoints.md).

The worker saves the attempt's checkpoint directory as a gzip'd tar (never unpacked by the
server); the store keeps the run's last one, its bytes addressed by content within a tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from herder.domain.states import AttemptState, RunState

CHUNK_BYTES = 4 * 1024 * 1024  # a stored row of a checkpoint's bytes
MIB = 1024 * 1024
# A tenant's ``max_checkpoint_mb`` unless set: its runs' checkpoints, all together. A suspended
# run holds no queue place and no timeout, so without it a tenant could keep a GiB a run in
# the store for ever. 4 GiB: 16 runs' checkpoints at the default checkpoint_mb, 4 at the most.
DEFAULT_MAX_CHECKPOINT_MB = 4096
QUOTA_FIELD = "max_checkpoint_mb"
# A content in the cold store that no checkpoint names stays this long before it is deleted:
# a download that began before it went unnamed reads to its end.
UNREFERENCED_GRACE = timedelta(minutes=1)


class ContentLocation(StrEnum):
    """Where a stored checkpoint content's bytes are."""

    DATABASE = "database"  # in chunks in the store
    COLD_STORE = "cold_store"  # a file or object in the cold store (``HERDER_COLD_STORE``)


def content_key(tenant_id: str, sha256: str) -> str:
    """A content's key in the cold store: one per tenant and content, as in the database."""
    return f"checkpoints/{tenant_id}/{sha256}"


def save_refusal(
    run_state: RunState,
    run_attempt: int,
    attempt_state: AttemptState,
    attempt: int,
    rank: int,
    worker_id: str,
    saved_by: str,
) -> str | None:
    """Why the attempt ``attempt`` (rank ``rank``, given to ``worker_id``) may not save the
    run's checkpoint now, as worker ``saved_by`` asks; None when it may. Only the run's
    current attempt, still running on the worker it was given to: a zombie's or a lost
    worker's late save never replaces what a later attempt saved. A gang's checkpoint is its
    rank 0's, restored into every member."""
    if worker_id != saved_by:
        return "the attempt is not this worker's"
    if attempt_state is not AttemptState.RUNNING or run_state is not RunState.RUNNING:
        return f"the attempt is {attempt_state} and its run {run_state}: it may save no more"
    if run_attempt != attempt:
        return f"attempt {attempt} is no longer its run's current attempt ({run_attempt})"
    if rank != 0:
        return "only rank 0 of a gang saves the run's checkpoint"
    return None


@dataclass(frozen=True)
class SaveBound:
    """What one save may hold: its job's ``checkpoint_mb``, and what its tenant's
    ``max_checkpoint_mb`` leaves beside the checkpoints of its other runs."""

    checkpoint_bytes: int
    kept_bytes: int  # by the tenant's other runs' checkpoints
    max_checkpoint_mb: int | None  # the tenant's; None: unlimited

    def quota_refusal(self, saving_bytes: int) -> str | None:
        return quota_refusal(self.kept_bytes, saving_bytes, self.max_checkpoint_mb)


def quota_refusal(kept_bytes: int, saving_bytes: int, max_checkpoint_mb: int | None) -> str | None:
    """Why a save of ``saving_bytes`` would take its tenant past ``max_checkpoint_mb``, its
    other runs' checkpoints keeping ``kept_bytes`` (the run's own previous one is replaced,
    so it does not count); None when it fits, or the tenant has no bound."""
    if max_checkpoint_mb is None or kept_bytes + saving_bytes <= max_checkpoint_mb * MIB:
        return None
    return (
        f"the checkpoint ({saving_bytes} bytes) would take the tenant past its "
        f"{QUOTA_FIELD} ({max_checkpoint_mb} MiB; its other runs' checkpoints keep "
        f"{kept_bytes} bytes): not saved; the run keeps its previous checkpoint"
    )


def kept_until(finished_at: datetime, keep_days: int) -> datetime | None:
    """When the checkpoint of a run that ended at ``finished_at`` goes: None, at once."""
    return finished_at + timedelta(days=keep_days) if keep_days > 0 else None


def readable(run_state: RunState, expires_at: datetime | None, now: datetime) -> bool:
    """A live run's checkpoint, or an ended one's while it is kept; gone otherwise, even
    before the maintenance loop deletes it."""
    if run_state.is_active:
        return True
    return expires_at is not None and now < expires_at
