"""Runs' checkpoints: saved by the worker holding the run's current attempt, fetched by the
worker holding its next one, read by the run's tenant, deleted when the run has ended.

One row a run in ``checkpoints`` (replaced by each save, in one transaction); each content in
``checkpoint_contents``, addressed by (tenant, sha256): saved once per tenant whatever the
runs that share them, never found through another tenant. Its bytes are in
``checkpoint_chunks``, or in the cold store when the server has one (``HERDER_COLD_STORE``).
Bytes in the database go with the last row that names them; a file or object in the cold
store is marked unnamed then and deleted by the sweeper after ``UNREFERENCED_GRACE``. Who may
save is ``domain.checkpoints.save_refusal``'s rule, checked when the upload starts and again
in the transaction that stores it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from sqlalchemy import Connection, and_, delete, exists, func, insert, select, text, update

from herder.clock import Clock
from herder.domain.checkpoints import (
    CHUNK_BYTES,
    MIB,
    UNREFERENCED_GRACE,
    ContentLocation,
    content_key,
    kept_until,
    readable,
    save_refusal,
)
from herder.domain.errors import Conflict, NotFound, Unavailable
from herder.domain.jobs import DEFAULT_CHECKPOINT_MB
from herder.domain.models import CheckpointInfo, CheckpointRef
from herder.domain.states import TERMINAL_RUN_STATES, AttemptState, RunState
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.history.retention import visible_runs_floor
from herder.store.schema import attempts, checkpoint_chunks, checkpoint_contents, checkpoints, runs

SWEEP_BATCH = 500  # checkpoints of ended runs handled per maintenance pass
PURGE_BATCH = 50  # unnamed contents deleted from the cold store per transaction


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
        self._blobs = blobs  # the cold store new contents go to; None: the database

    # --- the worker's side ---------------------------------------------------------------

    def upload_bound(self, worker_id: str, attempt_id: str, attempt: int) -> int:
        """How many bytes the save may hold (its job's ``checkpoint_mb``), if this worker's
        attempt may save now: ``NotFound`` or ``Conflict`` otherwise."""
        with self._db.read() as connection:
            return _saver(connection, worker_id, attempt_id, attempt, self._clock.now()).max_bytes

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
        one, if the attempt may still save."""
        now = self._clock.now()
        with self._db.write() as connection:
            saver = _saver(connection, worker_id, attempt_id, attempt, now)
            tenant_id = saver.tenant_id
            previous = connection.execute(
                select(checkpoints.c.sha256).where(checkpoints.c.run_id == saver.run_id)
            ).scalar()
            _hold_contents(connection, tenant_id, [sha256, *([previous] if previous else [])])
            stored = connection.execute(
                select(checkpoint_contents.c.location, checkpoint_contents.c.unreferenced_since)
                .where(
                    checkpoint_contents.c.tenant_id == tenant_id,
                    checkpoint_contents.c.sha256 == sha256,
                )
            ).first()  # fmt: skip
            if stored is None or not self._reusable(
                ContentLocation(stored.location), stored.unreferenced_since
            ):
                self._store_content(connection, tenant_id, sha256, stored_bytes, content)
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
                _forget_unreferenced(connection, tenant_id, [previous], now)

    def _reusable(self, location: ContentLocation, unreferenced_since: datetime | None) -> bool:
        """Whether stored content can be named again as it is. Content in the cold store
        that went unnamed may be deleted by now (or by a sweeper whose transaction failed
        after it), and a server without a cold store cannot read it: both are stored anew."""
        if location is ContentLocation.DATABASE:
            return True
        return self._blobs is not None and unreferenced_since is None

    def _store_content(
        self, connection: Connection, tenant_id: str, sha256: str, size: int, content: IO[bytes]
    ) -> None:
        """Keep the bytes where new contents go. Into the cold store before the transaction
        commits: a save that then fails leaves an unnamed file or object behind (the next
        save of the same content replaces it), never a row naming bytes that are not there."""
        named = and_(
            checkpoint_contents.c.tenant_id == tenant_id, checkpoint_contents.c.sha256 == sha256
        )
        connection.execute(delete(checkpoint_contents).where(named))
        content.seek(0)
        if self._blobs is not None:
            location = ContentLocation.COLD_STORE
            self._blobs.put_stream(content_key(tenant_id, sha256), content)
        else:
            location = ContentLocation.DATABASE
            seq = 0
            while chunk := content.read(CHUNK_BYTES):
                connection.execute(
                    insert(checkpoint_chunks).values(
                        tenant_id=tenant_id, sha256=sha256, seq=seq, data=chunk
                    )
                )
                seq += 1
        connection.execute(
            insert(checkpoint_contents).values(
                tenant_id=tenant_id, sha256=sha256, stored_bytes=size, location=location
            )
        )

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
        """The stored bytes, a piece at a time: a download holds no transaction open.
        ``NotFound`` when they are gone, ``Unavailable`` when they are in a cold store this
        server does not have; both before the first piece."""
        with self._db.read() as connection:
            location = connection.execute(
                select(checkpoint_contents.c.location).where(
                    checkpoint_contents.c.tenant_id == tenant_id,
                    checkpoint_contents.c.sha256 == sha256,
                )
            ).scalar()
        if location is None:
            raise NotFound(f"checkpoint content {sha256} is gone")
        if ContentLocation(location) is ContentLocation.DATABASE:
            return self._database_chunks(tenant_id, sha256)
        if self._blobs is None:
            raise Unavailable(
                "this checkpoint is in the cold store and this server has none: set "
                "HERDER_COLD_STORE as the server that saved it had it"
            )
        pieces = self._blobs.stream(content_key(tenant_id, sha256))
        if pieces is None:
            raise NotFound(f"checkpoint content {sha256} is not in the cold store")
        return pieces

    def _database_chunks(self, tenant_id: str, sha256: str) -> Iterator[bytes]:
        seq = 0
        while True:
            with self._db.read() as connection:
                data = connection.execute(
                    select(checkpoint_chunks.c.data).where(
                        checkpoint_chunks.c.tenant_id == tenant_id,
                        checkpoint_chunks.c.sha256 == sha256,
                        checkpoint_chunks.c.seq == seq,
                    )
                ).scalar()
            if data is None:
                return
            yield bytes(data)
            seq += 1

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
            _forget_unreferenced(connection, tenant_id, [info.sha256], self._clock.now())

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
                    _forget_unreferenced(connection, tenant_id, shas, now)
        return len(gone)

    def purge(self) -> int:
        """Delete from the cold store the contents no checkpoint has named for
        ``UNREFERENCED_GRACE``; how many went. Each is held while it goes, so a save that
        names it again waits and then stores it anew (``_reusable``)."""
        if self._blobs is None:
            return 0
        now = self._clock.now()
        with self._db.read() as connection:
            candidates = connection.execute(
                select(checkpoint_contents.c.tenant_id, checkpoint_contents.c.sha256)
                .where(
                    checkpoint_contents.c.location == ContentLocation.COLD_STORE,
                    checkpoint_contents.c.unreferenced_since <= now - UNREFERENCED_GRACE,
                )
                .limit(PURGE_BATCH)
            ).all()  # fmt: skip
        purged = 0
        for tenant_id, sha256 in candidates:  # one at a time: a lock held never waits on one
            with self._db.write() as connection:
                _hold_contents(connection, tenant_id, [sha256])
                unnamed = connection.execute(
                    delete(checkpoint_contents).where(
                        checkpoint_contents.c.tenant_id == tenant_id,
                        checkpoint_contents.c.sha256 == sha256,
                        checkpoint_contents.c.unreferenced_since.is_not(None),
                    )
                ).rowcount
                if unnamed:  # not named again since it was read
                    self._blobs.delete(content_key(tenant_id, sha256))
                    purged += 1
        return purged


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


def _hold_contents(connection: Connection, tenant_id: str, shas: Sequence[str]) -> None:
    """Until commit, no other transaction saves or forgets these contents of the tenant: a
    save that finds the bytes stored and names them never races a delete of their last
    other name (PostgreSQL; SQLite has one writer at a time)."""
    if connection.dialect.name != "postgresql":
        return
    for sha256 in sorted(set(shas)):  # one order everywhere: no deadlock
        connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"checkpoint:{tenant_id}:{sha256}"},
        )


def _forget_unreferenced(
    connection: Connection, tenant_id: str, shas: Sequence[str], now: datetime
) -> None:
    """Of these contents of the tenant, those no checkpoint names any more: delete their bytes
    in the database; mark those in the cold store for the sweeper's ``purge``."""
    _hold_contents(connection, tenant_id, shas)
    named = exists().where(
        and_(
            checkpoints.c.tenant_id == checkpoint_contents.c.tenant_id,
            checkpoints.c.sha256 == checkpoint_contents.c.sha256,
        )
    )
    unnamed = connection.execute(
        select(checkpoint_contents.c.sha256, checkpoint_contents.c.location).where(
            checkpoint_contents.c.tenant_id == tenant_id,
            checkpoint_contents.c.sha256.in_(list(shas)),
            ~named,
        )
    ).all()
    in_database = [row.sha256 for row in unnamed if row.location == ContentLocation.DATABASE]
    in_cold_store = [row.sha256 for row in unnamed if row.location == ContentLocation.COLD_STORE]
    of_tenant = checkpoint_contents.c.tenant_id == tenant_id
    if in_database:
        connection.execute(
            delete(checkpoint_chunks).where(
                checkpoint_chunks.c.tenant_id == tenant_id,
                checkpoint_chunks.c.sha256.in_(in_database),
            )
        )
        connection.execute(
            delete(checkpoint_contents).where(
                of_tenant, checkpoint_contents.c.sha256.in_(in_database)
            )
        )
    if in_cold_store:
        connection.execute(
            update(checkpoint_contents)
            .where(
                of_tenant,
                checkpoint_contents.c.sha256.in_(in_cold_store),
                checkpoint_contents.c.unreferenced_since.is_(None),
            )
            .values(unreferenced_since=now)
        )


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
