"""Uploaded programs, content-addressed per tenant. A tenant's row names its bytes by sha256
and says where they are (``domain.artifacts.ArtifactLocation``): in the blob store under
``artifacts/<tenant>/<sha256>``, as every upload since revision 0033 is, or in ``blobs``, the
database's bytes shared by digest, as uploads before it were until the move takes them to the
blob store (``app/artifacts.move_to_blob_store``). Bytes are found only through the asking
tenant's own row, so another tenant's, even of the same digest, is not found.

Bytes are put in the blob store before a row names them there: a failure between leaves a
file or object no row names (the next upload of the content replaces it), never a row naming
bytes that are not there. A row is read with its ``blobs`` bytes in one statement, so a move
committing meanwhile is seen whole or not at all; ``blobs`` bytes are deleted only once no
row keeps them there.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import IO, Any

from sqlalchemy import Connection, and_, delete, exists, select, update

from herder.clock import Clock
from herder.domain.artifacts import ArtifactLocation, artifact_key, is_sha256
from herder.domain.errors import NotFound, Unavailable
from herder.domain.models import Artifact
from herder.domain.states import AttemptState
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.history.live import live_floor
from herder.store.owned import MAX_SHOWN_CHARS, owned_row
from herder.store.schema import artifacts, attempts, blobs, runs

log = logging.getLogger("herder.store")
IN_DATABASE = artifacts.c.location == ArtifactLocation.DATABASE
# a row with its bytes when they are in ``blobs`` (NULL data when they are in the blob store)
WITH_DATABASE_BYTES = artifacts.outerjoin(
    blobs, and_(blobs.c.sha256 == artifacts.c.sha256, IN_DATABASE)
)


class ArtifactRepository:
    def __init__(self, database: Database, clock: Clock, blobs: BlobStore | None) -> None:
        self._db = database
        self._clock = clock
        self._blobs = blobs  # where uploads go; None: this process keeps no artifacts

    def put(
        self,
        tenant_id: str,
        content: IO[bytes],
        *,
        sha256: str,
        size: int,
        filename: str,
        media_type: str,
    ) -> Artifact:
        """Keep ``content`` (read from its start; its ``sha256`` and ``size`` measured by the
        caller) as the tenant's artifact, once per tenant and content: one the tenant has in
        the blob store already is named as it is; one it has in ``blobs`` moves to the blob
        store with these bytes."""
        store = self._store()
        with self._db.read() as connection:
            location = connection.execute(
                select(artifacts.c.location).where(_named(tenant_id, sha256))
            ).scalar()
        if location != ArtifactLocation.BLOB_STORE:
            content.seek(0)
            store.put_stream(artifact_key(tenant_id, sha256), content)
            with self._db.write() as connection:
                connection.execute(
                    insert_ignoring_duplicates(
                        self._db,
                        artifacts,
                        tenant_id=tenant_id,
                        sha256=sha256,
                        size=size,
                        media_type=media_type,
                        filename=filename,
                        created_at=self._clock.now(),
                        location=ArtifactLocation.BLOB_STORE,
                    )
                )
                _moved(connection, tenant_id, sha256, size=size, media_type=media_type)
        return self.get(tenant_id, sha256)

    def get(self, tenant_id: str, artifact_id: str) -> Artifact:
        with self._db.read() as connection:
            row = owned_row(
                connection, artifacts, tenant_id, artifact_id, "artifact", key=artifacts.c.sha256
            )
        return _artifact(row)

    def read(self, tenant_id: str, artifact_id: str) -> tuple[Artifact, Iterator[bytes]]:
        """The tenant's artifact and its bytes, a piece at a time (from the blob store, or
        whole from ``blobs``): ``NotFound`` for another tenant's."""
        with self._db.read() as connection:
            row = connection.execute(
                select(artifacts, blobs.c.data)
                .select_from(WITH_DATABASE_BYTES)
                .where(_named(tenant_id, artifact_id))
            ).first()
        if row is None:
            raise NotFound(f"artifact {artifact_id[:MAX_SHOWN_CHARS]} not found")
        return _artifact(row), self._bytes(row)

    def read_for_worker(self, worker_id: str, artifact_id: str) -> tuple[int, Iterator[bytes]]:
        """The size and bytes of the artifact a running attempt on this worker needs, its
        run's tenant's copy: a worker sees only what it was given."""
        if not is_sha256(artifact_id):
            raise NotFound(f"artifact {artifact_id[:MAX_SHOWN_CHARS]} not found")
        with self._db.read() as connection:
            floor = live_floor(connection, self._clock.now())
            needed = exists().where(
                attempts.c.worker_id == worker_id,
                attempts.c.state == AttemptState.RUNNING,
                attempts.c.run_id >= floor,
                runs.c.id == attempts.c.run_id,
                runs.c.id >= floor,
                runs.c.tenant_id == artifacts.c.tenant_id,
                runs.c.artifact == artifacts.c.sha256,
            )
            row = connection.execute(
                select(artifacts, blobs.c.data)
                .select_from(WITH_DATABASE_BYTES)
                .where(artifacts.c.sha256 == artifact_id, needed)
                .limit(1)
            ).first()
        if row is None:
            raise NotFound(f"artifact {artifact_id} is not needed by any attempt of this worker")
        return row.size, self._bytes(row)

    def _bytes(self, row: Any) -> Iterator[bytes]:
        """A row's bytes, as many as it says it has (``_as_many``), before the first piece:
        ``NotFound`` when ``blobs`` lost them, ``Unavailable`` when this server's blob store
        has not the file the row names."""
        if row.location == ArtifactLocation.DATABASE:
            if row.data is None:
                raise NotFound(f"artifact {row.sha256}'s bytes are gone from the database")
            return _as_many(iter((bytes(row.data),)), row.size, f"blobs {row.sha256}")
        key = artifact_key(row.tenant_id, row.sha256)
        pieces = self._store().stream(key)
        if pieces is None:
            raise Unavailable(
                f"artifact {row.sha256} is not in this server's blob store ({key}): every "
                "server of a cell must share one HERDER_COLD_STORE (s3://… or a shared path)"
            )
        return _as_many(pieces, row.size, key)

    def _store(self) -> BlobStore:
        if self._blobs is None:
            raise Unavailable("this process was started without a blob store for artifacts")
        return self._blobs

    # --- the move of bytes from ``blobs`` to the blob store ------------------------------

    def in_database(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` (tenant, sha256) of artifacts whose bytes are in ``blobs``, in
        that order, those past ``after``."""
        query = select(artifacts.c.tenant_id, artifacts.c.sha256).where(IN_DATABASE)
        if after is not None:
            tenant_id, sha256 = after
            query = query.where(
                (artifacts.c.tenant_id > tenant_id)
                | and_(artifacts.c.tenant_id == tenant_id, artifacts.c.sha256 > sha256)
            )
        order = (artifacts.c.tenant_id, artifacts.c.sha256)
        with self._db.read() as connection:
            rows = connection.execute(query.order_by(*order).limit(limit)).all()
        return [(row.tenant_id, row.sha256) for row in rows]

    def database_bytes(self, sha256: str) -> bytes | None:
        with self._db.read() as connection:
            data = connection.execute(select(blobs.c.data).where(blobs.c.sha256 == sha256)).scalar()
        return None if data is None else bytes(data)

    def move(self, tenant_id: str, sha256: str, data: bytes) -> bool:
        """Put ``data`` (the artifact's bytes, checked by the caller) in the blob store and
        name it there, if the row still says ``blobs``; whether it moved now."""
        self._store().put_stream(artifact_key(tenant_id, sha256), io.BytesIO(data))
        with self._db.write() as connection:
            return _moved(connection, tenant_id, sha256, size=len(data))

    def forget_unnamed_bytes(self, limit: int) -> int:
        """Delete up to ``limit`` of the ``blobs`` rows no artifact keeps there (two moves
        of one content at once can each leave the other's); how many went."""
        with self._db.read() as connection:
            unnamed = connection.execute(
                select(blobs.c.sha256).where(~_kept(blobs.c.sha256)).limit(limit)
            ).scalars().all()  # fmt: skip
        forgotten = 0
        for sha256 in unnamed:
            with self._db.write() as connection:
                forgotten += _forget_bytes(connection, sha256)
        return forgotten


def _named(tenant_id: str, sha256: str) -> Any:
    return and_(artifacts.c.tenant_id == tenant_id, artifacts.c.sha256 == sha256)


def _kept(sha256: Any) -> Any:
    """Whether an artifact row keeps these bytes in ``blobs``."""
    return exists().where(artifacts.c.sha256 == sha256, IN_DATABASE)


def _moved(connection: Connection, tenant_id: str, sha256: str, **measured: object) -> bool:
    """Name the blob store as where the tenant's artifact is, with what was ``measured`` of
    the bytes put there, if its row said ``blobs``; then delete those bytes when no row keeps
    them there."""
    moved = connection.execute(
        update(artifacts)
        .where(_named(tenant_id, sha256), IN_DATABASE)
        .values(location=ArtifactLocation.BLOB_STORE, **measured)
    ).rowcount
    if moved:
        _forget_bytes(connection, sha256)
    return bool(moved)


def _forget_bytes(connection: Connection, sha256: str) -> int:
    return connection.execute(
        delete(blobs).where(blobs.c.sha256 == sha256, ~_kept(blobs.c.sha256))
    ).rowcount


def _as_many(pieces: Iterator[bytes], size: int, key: str) -> Iterator[bytes]:
    """The first ``size`` bytes of ``pieces``, the length a download announces: an object
    changed in the store is cut there (its reader's sha256 check judges what it got) or, when
    shorter, ends the download short, which its reader sees as cut off; either is logged."""
    left = size
    try:
        for piece in pieces:
            if len(piece) > left:
                log.error("%s holds more than its artifact's %d bytes", key, size)
                yield piece[:left]
                return
            left -= len(piece)
            yield piece
            if not left:
                return
        if left:
            log.error("%s holds %d bytes, not its artifact's %d", key, size - left, size)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:  # the file or the object's body
            close()


def _artifact(row: Any) -> Artifact:
    """The row as its tenant sees it: named by its sha256, wherever its bytes are."""
    kept = ("size", "media_type", "filename", "created_at")
    return Artifact(id=row.sha256, **{name: getattr(row, name) for name in kept})
