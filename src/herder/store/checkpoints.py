"""Runs' checkpoints: saved by the worker holding the run's current attempt, fetched by the
worker holding its next one, read by the run's tenant, deleted when the run has ended.

One row a run in ``checkpoints`` (replaced by each save, in one transaction), naming its
content by (tenant, sha256); where the content's bytes are is ``checkpoint_contents``'s
business. Who may save is ``domain.checkpoints.save_refusal``'s rule, checked when the upload
starts and again in the transaction that stores it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from sqlalchemy import Connection, delete, func, insert, select, update

from herder.clock import Clock
from herder.domain.checkpoints import (
    MIB,
    QUOTA_FIELD,
    SaveBound,
    kept_until,
    quota_refusal,
    readable,
    save_refusal,
)
from herder.domain.errors import Conflict, NotFound
from herder.domain.jobs import DEFAULT_CHECKPOINT_MB
from herder.domain.models import CheckpointInfo, CheckpointRef
from herder.domain.states import TERMINAL_RUN_STATES, AttemptState, RunState
from herder.domain.tenants import TenantQuotas
from herder.store.checkpoint_contents import (
    CheckpointContents,
    forget_unreferenced,
    hold_contents,
)
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.history.retention import visible_runs_floor
from herder.store.schema import attempts, checkpoints, runs, tenants

SWEEP_BATCH = 500  # checkpoints of ended runs handled per maintenance pass


@dataclass(frozen=True)
class _Saver:
    """The attempt that asks to save, and its run, as the store has them."""

    run_id: str
    tenant_id: str
    max_bytes: int


class CheckpointRepository:
    def __init__(self, database: Database, clock: Clock, blobs: BlobStore | None = None) -> None:
        self._db = database
        self._clock = clock
        self.contents = CheckpointContents(database, blobs)  # the bytes, wherever they are

    # --- the worker's side ---------------------------------------------------------------

    def upload_bound(self, worker_id: str, attempt_id: str, attempt: int) -> SaveBound:
        """What the save may hold (its job's ``checkpoint_mb``, its tenant's room), if this
        worker's attempt may save now: ``NotFound`` or ``Conflict`` otherwise."""
        with self._db.read() as connection:
            saver = _saver(connection, worker_id, attempt_id, attempt, self._clock.now())
            return SaveBound(
                saver.max_bytes,
                _kept_by_other_runs(connection, saver.tenant_id, saver.run_id),
                _max_checkpoint_mb(connection, saver.tenant_id),
            )

    def save(
        self,
        worker_id: str,
        attempt_id: str,
        attempt: int,
        content: IO[bytes],
        sha256: str,
        stored_bytes: int,
    ) -> None:
        """Make ``content`` (read from its start) the run's checkpoint, replacing the last
        one, if the attempt may still save and it fits its tenant's ``max_checkpoint_mb``
        (``Conflict`` naming it otherwise; the tenant's row is held, so two saves of one
        tenant are counted one after the other)."""
        now = self._clock.now()
        with self._db.write() as connection:
            saver = _saver(connection, worker_id, attempt_id, attempt, now)
            tenant_id = saver.tenant_id
            refusal = quota_refusal(
                _kept_by_other_runs(connection, tenant_id, saver.run_id),
                stored_bytes,
                _max_checkpoint_mb(connection, tenant_id, hold=True),
            )
            if refusal is not None:
                raise Conflict(refusal, field=QUOTA_FIELD)
            previous = connection.execute(
                select(checkpoints.c.sha256).where(checkpoints.c.run_id == saver.run_id)
            ).scalar()
            hold_contents(connection, tenant_id, [sha256, *([previous] if previous else [])])
            self.contents.keep(connection, tenant_id, sha256, stored_bytes, content)
            connection.execute(delete(checkpoints).where(checkpoints.c.run_id == saver.run_id))
            connection.execute(
                insert(checkpoints).values(
                    run_id=saver.run_id,
                    tenant_id=tenant_id,
                    attempt=attempt,
                    sha256=sha256,
                    stored_bytes=stored_bytes,
                    saved_at=now,
                )
            )
            if previous is not None and previous != sha256:
                forget_unreferenced(connection, tenant_id, [previous], now)

    def for_attempt(
        self, worker_id: str, attempt_id: str, attempt: int
    ) -> tuple[str, CheckpointRef]:
        """The checkpoint this worker's running attempt restores, and its tenant:
        ``NotFound`` when its run has none, or the attempt is not this worker's running one."""
        now = self._clock.now()
        with self._db.read() as connection:
            floor = live_floor(connection, now)
            row = connection.execute(
                select(
                    checkpoints.c.tenant_id,
                    checkpoints.c.sha256,
                    checkpoints.c.stored_bytes,
                    checkpoints.c.attempt,
                )
                .join(attempts, attempts.c.run_id == checkpoints.c.run_id)
                .where(
                    attempts.c.id == attempt_id,
                    attempts.c.number == attempt,
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                    attempts.c.run_id >= floor,
                )
            ).first()
        if row is None:
            raise NotFound(f"no checkpoint for attempt {attempt_id} of this worker")
        ref = CheckpointRef(sha256=row.sha256, stored_bytes=row.stored_bytes, attempt=row.attempt)
        return row.tenant_id, ref

    def chunks(self, tenant_id: str, sha256: str) -> Iterator[bytes]:
        """The stored bytes, a piece at a time (``CheckpointContents.read``)."""
        return self.contents.read(tenant_id, sha256)

    # --- the tenant's side ---------------------------------------------------------------

    def get(self, tenant_id: str, run_id: str) -> CheckpointInfo:
        """The run's checkpoint while it is kept; another tenant's run is not found."""
        with self._db.read() as connection:
            found = kept_checkpoints(connection, tenant_id, [run_id], self._clock.now())
        if run_id not in found:
            raise NotFound(f"run {run_id} has no checkpoint")
        return found[run_id]

    def delete(self, tenant_id: str, run_id: str) -> None:
        """Forget it: the run's next attempt starts without one."""
        with self._db.write() as connection:
            info = kept_checkpoints(connection, tenant_id, [run_id], self._clock.now()).get(run_id)
            if info is None:
                raise NotFound(f"run {run_id} has no checkpoint")
            connection.execute(delete(checkpoints).where(checkpoints.c.run_id == run_id))
            forget_unreferenced(connection, tenant_id, [info.sha256], self._clock.now())

    # --- the maintenance loop ------------------------------------------------------------

    def sweep(self) -> int:
        """Delete the checkpoints of ended runs (at once, or ``checkpoint_keep_days`` after
        the end) and those past their keep; how many went."""
        now = self._clock.now()
        with self._db.write() as connection:
            expired = connection.execute(
                select(checkpoints.c.run_id, checkpoints.c.tenant_id, checkpoints.c.sha256)
                .where(checkpoints.c.expires_at <= now)
                .limit(SWEEP_BATCH)
            ).all()
            oldest = select(func.min(checkpoints.c.run_id)).scalar_subquery()
            ended = connection.execute(
                select(
                    checkpoints.c.run_id, checkpoints.c.tenant_id, checkpoints.c.sha256,
                    runs.c.finished_at, runs.c.spec,
                )
                .join(runs, runs.c.id == checkpoints.c.run_id)
                .where(
                    checkpoints.c.expires_at.is_(None),
                    runs.c.state.in_(sorted(TERMINAL_RUN_STATES)),
                    runs.c.id >= oldest,  # no slice older than the oldest checkpoint is read
                )
                .limit(SWEEP_BATCH)
            ).all()  # fmt: skip
            gone: list[tuple[str, str, str]] = [(r.run_id, r.tenant_id, r.sha256) for r in expired]
            for row in ended:
                keep_days = int(row.spec.get("checkpoint_keep_days", 0))
                until = kept_until(row.finished_at or now, keep_days)
                if until is None or until <= now:
                    gone.append((row.run_id, row.tenant_id, row.sha256))
                else:
                    connection.execute(
                        update(checkpoints)
                        .where(checkpoints.c.run_id == row.run_id)
                        .values(expires_at=until)
                    )
            if gone:
                gone_runs = [run_id for run_id, _, _ in gone]
                connection.execute(delete(checkpoints).where(checkpoints.c.run_id.in_(gone_runs)))
                for tenant_id in sorted({tenant for _, tenant, _ in gone}):
                    shas = sorted({sha for _, tenant, sha in gone if tenant == tenant_id})
                    forget_unreferenced(connection, tenant_id, shas, now)
        return len(gone)

    def purge(self) -> int:
        """Delete the cold store's contents unnamed for a grace; how many went."""
        return self.contents.purge(self._clock.now())


def refs_for_claim(connection: Connection, run_ids: Sequence[str]) -> dict[str, CheckpointRef]:
    """The checkpoints the claimed attempts restore (only attempts after the first ask)."""
    if not run_ids:
        return {}
    rows = connection.execute(
        select(
            checkpoints.c.run_id, checkpoints.c.sha256, checkpoints.c.stored_bytes,
            checkpoints.c.attempt,
        ).where(checkpoints.c.run_id.in_(sorted(set(run_ids))))
    ).all()  # fmt: skip
    return {
        row.run_id: CheckpointRef(
            sha256=row.sha256, stored_bytes=row.stored_bytes, attempt=row.attempt
        )
        for row in rows
    }


def _saver(
    connection: Connection, worker_id: str, attempt_id: str, attempt: int, now: datetime
) -> _Saver:
    floor = live_floor(connection, now)
    row = connection.execute(
        select(
            attempts.c.number, attempts.c.rank, attempts.c.worker_id, attempts.c.state,
            runs.c.id, runs.c.tenant_id, runs.c.state.label("run_state"), runs.c.attempt_count,
            runs.c.spec,
        )
        .join(runs, runs.c.id == attempts.c.run_id)
        .where(attempts.c.id == attempt_id, attempts.c.run_id >= floor, runs.c.id >= floor)
    ).first()  # fmt: skip
    if row is None or row.worker_id != worker_id:
        raise NotFound(f"attempt {attempt_id} is not one of this worker's")
    if row.number != attempt:
        raise Conflict(f"attempt {attempt_id} is number {row.number}, not {attempt}")
    refusal = save_refusal(
        RunState(row.run_state), row.attempt_count, AttemptState(row.state), attempt, row.rank,
        row.worker_id, worker_id,
    )  # fmt: skip
    if refusal is not None:
        raise Conflict(f"checkpoint not saved: {refusal}")
    max_mb = int(row.spec.get("checkpoint_mb", DEFAULT_CHECKPOINT_MB))
    return _Saver(row.id, row.tenant_id, max_mb * MIB)


def _max_checkpoint_mb(connection: Connection, tenant_id: str, *, hold: bool = False) -> int | None:
    query = select(tenants.c.quotas).where(tenants.c.id == tenant_id)
    quotas = connection.execute(query.with_for_update() if hold else query).scalar()
    return TenantQuotas.model_validate(quotas or {}).max_checkpoint_mb


def _kept_by_other_runs(connection: Connection, tenant_id: str, run_id: str) -> int:
    """The bytes of the tenant's checkpoints but this run's (each run's counted, whatever
    content it shares with another)."""
    total = connection.execute(
        select(func.coalesce(func.sum(checkpoints.c.stored_bytes), 0)).where(
            checkpoints.c.tenant_id == tenant_id, checkpoints.c.run_id != run_id
        )
    ).scalar_one()
    return int(total)


def kept_checkpoints(
    connection: Connection, tenant_id: str, run_ids: Sequence[str], now: datetime
) -> dict[str, CheckpointInfo]:
    """The checkpoints of these runs of the tenant that may still be read (``readable``)."""
    if not run_ids:
        return {}
    floor = visible_runs_floor(connection, tenant_id, now)
    rows = connection.execute(
        select(checkpoints, runs.c.state.label("run_state"))
        .join(runs, runs.c.id == checkpoints.c.run_id)
        .where(
            checkpoints.c.tenant_id == tenant_id,
            checkpoints.c.run_id.in_(list(run_ids)),
            runs.c.tenant_id == tenant_id,
            runs.c.id >= floor,
        )
    ).all()
    return {
        row.run_id: CheckpointInfo(
            run_id=row.run_id,
            attempt=row.attempt,
            sha256=row.sha256,
            stored_bytes=row.stored_bytes,
            saved_at=row.saved_at,
            expires_at=row.expires_at,
        )
        for row in rows
        if readable(RunState(row.run_state), row.expires_at, now)
    }
