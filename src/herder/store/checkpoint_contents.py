"""Where runs' checkpoint contents are: each content, addressed by (tenant, sha256), is
stored once per tenant whatever the runs that name it, and never found through another
tenant. ``checkpoint_contents`` says where its bytes are: ``checkpoint_chunks`` in the
database, or the cold store when the server has one (``HERDER_COLD_STORE``). Bytes in the
database go with the last checkpoint that names them; a file or object in the cold store is
marked unnamed then and deleted by the sweeper's ``purge`` after ``UNREFERENCED_GRACE``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import IO

from sqlalchemy import Connection, and_, delete, exists, insert, select, text, update

from herder.domain.checkpoints import CHUNK_BYTES, UNREFERENCED_GRACE, ContentLocation, content_key
from herder.domain.errors import NotFound, Unavailable
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.schema import checkpoint_chunks, checkpoint_contents, checkpoints

PURGE_BATCH = 50  # unnamed contents deleted from the cold store per pass


class CheckpointContents:
    def __init__(self, database: Database, blobs: BlobStore | None) -> None:
        self._db = database
        self._blobs = blobs  # the cold store new contents go to; None: the database

    def keep(
        self, connection: Connection, tenant_id: str, sha256: str, size: int, content: IO[bytes]
    ) -> None:
        """Have the content stored, in the caller's transaction (which holds it): as it is
        when it can be named again, else anew."""
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
            self._store_content(connection, tenant_id, sha256, size, content)

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

    def read(self, tenant_id: str, sha256: str) -> Iterator[bytes]:
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

    def purge(self, now: datetime) -> int:
        """Delete from the cold store the contents no checkpoint has named for
        ``UNREFERENCED_GRACE``; how many went. Each is held while it goes, so a save that
        names it again waits and then stores it anew (``_reusable``)."""
        if self._blobs is None:
            return 0
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
                hold_contents(connection, tenant_id, [sha256])
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


def hold_contents(connection: Connection, tenant_id: str, shas: Sequence[str]) -> None:
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


def forget_unreferenced(
    connection: Connection, tenant_id: str, shas: Sequence[str], now: datetime
) -> None:
    """Of these contents of the tenant, those no checkpoint names any more: delete their bytes
    in the database; mark those in the cold store for the sweeper's ``purge``."""
    hold_contents(connection, tenant_id, shas)
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
