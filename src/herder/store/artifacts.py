"""Uploaded programs, content-addressed: the bytes are stored once per sha256, and each
tenant that uploaded them owns a row that makes them visible to it (and only to it)."""

from __future__ import annotations

import hashlib

from sqlalchemy import and_, exists, select

from herder.clock import Clock
from herder.domain.errors import NotFound
from herder.domain.models import Artifact
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.owned import owned_row
from herder.store.schema import artifacts, attempts, blobs, runs


class ArtifactRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def put(self, tenant_id: str, data: bytes, *, filename: str, media_type: str) -> Artifact:
        sha256 = hashlib.sha256(data).hexdigest()
        now = self._clock.now()
        with self._db.write() as connection:
            connection.execute(
                insert_ignoring_duplicates(
                    self._db, blobs, sha256=sha256, size=len(data), data=data
                )
            )
            connection.execute(
                insert_ignoring_duplicates(
                    self._db,
                    artifacts,
                    tenant_id=tenant_id,
                    sha256=sha256,
                    size=len(data),
                    media_type=media_type,
                    filename=filename,
                    created_at=now,
                )
            )
        return self.get(tenant_id, sha256)

    def get(self, tenant_id: str, artifact_id: str) -> Artifact:
        with self._db.read() as connection:
            row = owned_row(
                connection, artifacts, tenant_id, artifact_id, "artifact", key=artifacts.c.sha256
            )
        return Artifact(
            id=row.sha256,
            size=row.size,
            media_type=row.media_type,
            filename=row.filename,
            created_at=row.created_at,
        )

    def read(self, tenant_id: str, artifact_id: str) -> bytes:
        self.get(tenant_id, artifact_id)
        with self._db.read() as connection:
            data = connection.execute(
                select(blobs.c.data).where(blobs.c.sha256 == artifact_id)
            ).scalar_one()
        return bytes(data)

    def read_for_worker(self, worker_id: str, artifact_id: str) -> bytes:
        """The bytes, if a running attempt on this worker needs them (a worker sees only what
        it was given)."""
        needed = exists().where(
            and_(
                attempts.c.worker_id == worker_id,
                attempts.c.state == AttemptState.RUNNING,
                runs.c.id == attempts.c.run_id,
                runs.c.artifact == artifact_id,
            )
        )
        with self._db.read() as connection:
            data = connection.execute(
                select(blobs.c.data).where(blobs.c.sha256 == artifact_id, needed)
            ).scalar()
        if data is None:
            raise NotFound(f"artifact {artifact_id} is not needed by any attempt of this worker")
        return bytes(data)
