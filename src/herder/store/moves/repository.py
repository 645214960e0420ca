"""The plain reads and writes of a tenant's move (``Store.moves``): its state read, the
frozen tenant exported and its programs' bytes read, a program's bytes received before the
import, an arriving tenant's import taken back. The shifts of its state and the import are
use cases (``app/moves.py``) over ``states`` and ``imports``."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO

from herder.domain.artifacts import artifact_key
from herder.domain.errors import Conflict, Invalid, Unavailable
from herder.domain.moves import MoveState, TenantExport
from herder.keyring import Keyring
from herder.store.artifacts import ArtifactRepository
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.moves import exports, imports, states
from herder.store.moves.states import MoveStatus


class TenantMoves:
    def __init__(
        self,
        database: Database,
        keyring: Keyring | None,
        artifacts: ArtifactRepository,
        blobs: BlobStore | None,
        forget_tenant: Callable[[str], None],
    ) -> None:
        self._db = database
        self._keyring = keyring
        self._artifacts = artifacts
        self._blobs = blobs
        self.forget_tenant = forget_tenant  # this process's recent keys of a tenant

    def status(self, tenant_id: str) -> MoveStatus:
        with self._db.read() as connection:
            return states.status(connection, tenant_id)

    def export(self, tenant_id: str) -> TenantExport:
        """The frozen tenant's definitions, read in one transaction (``Conflict`` unless it
        is frozen). Sealed values are opened with this cell's keyring, to be sealed again
        by the target's."""
        with self._db.write() as connection:
            return exports.export(connection, tenant_id, self.keys)

    def artifact_content(self, tenant_id: str, sha256: str) -> Iterator[bytes]:
        """A frozen tenant's program, for the target (where it is kept: ``artifacts.read``)."""
        if self.status(tenant_id).state is not MoveState.FROZEN:
            raise Conflict(f"tenant {tenant_id}'s programs are exported only once it is frozen")
        _, content = self._artifacts.read(tenant_id, sha256)
        return content

    def receive_artifact(self, tenant_id: str, sha256: str, content: IO[bytes]) -> None:
        """A moving tenant's program kept in this cell's blob store, before the import names
        it (its sha256 checked): ``Conflict`` for a tenant that lives here."""
        digest = hashlib.sha256()
        for piece in iter(lambda: content.read(1 << 16), b""):
            digest.update(piece)
        if digest.hexdigest() != sha256:
            raise Invalid(f"the bytes sent are not artifact {sha256[:64]} (their sha256 differs)")
        with self._db.read() as connection:
            here = states.status_if_here(connection, tenant_id)
        if here is not None and here.state in (None, MoveState.FROZEN):
            raise Conflict(f"tenant {tenant_id} already lives in this cell")
        content.seek(0)
        self._store().put_stream(artifact_key(tenant_id, sha256), content)

    def unsent(self, tenant_id: str, digests: Iterable[str]) -> list[str]:
        """The programs among ``digests`` whose bytes this cell's blob store lacks."""
        return [sha256 for sha256 in digests if not self._kept(artifact_key(tenant_id, sha256))]

    def remove_import(self, tenant_id: str) -> None:
        """An import taken back (a later step of its move failed): an arriving tenant's
        removed; a returning one moved again to the cell it still lives in (what it left
        here is its history, and its definitions are answered "moved")."""
        with self._db.write() as connection:
            here = imports.here(connection, tenant_id)
            if here is None or here[0] is MoveState.MOVED:
                return  # nothing was imported, or it was taken back already
            state, cell = here
            if state is MoveState.ARRIVING:
                imports.remove(connection, tenant_id)
            elif state is MoveState.RETURNING:
                states.set_state(connection, tenant_id, MoveState.MOVED, cell)
            else:
                raise Conflict(f"tenant {tenant_id} lives in this cell: only an import is removed")
        self.forget_tenant(tenant_id)

    def keys(self) -> Keyring:
        if self._keyring is None:
            raise Unavailable("this server has no secrets key: a tenant with secrets cannot move")
        return self._keyring

    def _store(self) -> BlobStore:
        if self._blobs is None:
            raise Unavailable("this process was started without a blob store for artifacts")
        return self._blobs

    def _kept(self, key: str) -> bool:
        """Whether the blob store has ``key``, its reading opened and closed at once."""
        pieces = self._store().stream(key)
        if pieces is None:
            return False
        next(pieces, None)
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
        return True
