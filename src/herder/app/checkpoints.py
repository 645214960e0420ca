"""Runs' checkpoints over the API: a worker's save streamed in and its restore streamed out;
a tenant's download (docs/checkpoints.md)."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import AsyncIterator, Iterator

from starlette.concurrency import run_in_threadpool

from herder.domain.artifacts import human_size
from herder.domain.checkpoints import QUOTA_FIELD
from herder.domain.errors import Conflict, Invalid, TooLarge
from herder.domain.models import CheckpointInfo
from herder.store.store import Store

SPOOL_BYTES = 8 * 1024 * 1024  # a save up to this is held in memory on its way; past it, a file


async def save(
    store: Store, worker_id: str, attempt_id: str, attempt: int, body: AsyncIterator[bytes]
) -> None:
    """Read the worker's upload, bounded by its job's checkpoint_mb and by its tenant's
    max_checkpoint_mb before a byte past either is kept, then store it as the run's
    checkpoint if the attempt may still save and it still fits (checked before the read
    and again as it is stored)."""
    bound = await run_in_threadpool(store.checkpoints.upload_bound, worker_id, attempt_id, attempt)
    digest, size = hashlib.sha256(), 0
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as content:
        async for piece in body:
            size += len(piece)
            if size > bound.checkpoint_bytes:
                raise TooLarge(
                    f"the checkpoint is over its job's checkpoint_mb "
                    f"({human_size(bound.checkpoint_bytes)}): not saved; the run keeps its "
                    "previous checkpoint"
                )
            refusal = bound.quota_refusal(size)
            if refusal is not None:
                raise Conflict(refusal, field=QUOTA_FIELD)
            digest.update(piece)
            content.write(piece)
        if size == 0:
            raise Invalid("a checkpoint upload holds the saved bytes; this one is empty")
        await run_in_threadpool(
            store.checkpoints.save, worker_id, attempt_id, attempt, content,
            digest.hexdigest(), size,
        )  # fmt: skip


def restore(
    store: Store, worker_id: str, attempt_id: str, attempt: int
) -> tuple[str, int, Iterator[bytes]]:
    """What this worker's running attempt restores: its sha256, size and bytes."""
    tenant_id, ref = store.checkpoints.for_attempt(worker_id, attempt_id, attempt)
    return ref.sha256, ref.stored_bytes, store.checkpoints.chunks(tenant_id, ref.sha256)


def content(store: Store, tenant_id: str, run_id: str) -> tuple[CheckpointInfo, Iterator[bytes]]:
    """The run's checkpoint and its bytes."""
    info = store.checkpoints.get(tenant_id, run_id)
    return info, store.checkpoints.chunks(tenant_id, info.sha256)
