"""A frozen tenant's definitions read for its move, in one transaction: each copied table's
rows as JSON (times ISO 8601, bytes base64), pool shares by their pool's name, sealed values
opened with this cell's keyring (to be sealed again by the target's)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, select

from herder.domain.artifacts import ArtifactLocation
from herder.domain.errors import Conflict, NotFound
from herder.domain.moves import MoveState, Row, TenantExport
from herder.keyring import Keyring, Sealed
from herder.store.moves.copied import (
    CHILDREN,
    COPIED,
    SEALED_COLUMNS,
    SEALED_TABLES,
    SEALED_VALUE,
    associated,
    state_of,
)
from herder.store.schema import artifacts, pool_shares, pools, tenants


def export(connection: Connection, tenant_id: str, keys: Callable[[], Keyring]) -> TenantExport:
    """The frozen tenant's definitions (``Conflict`` unless it is frozen: nothing of it
    changes then), its row held while they are read; ``keys`` opens sealed values."""
    state = connection.execute(
        select(tenants.c.move_state).where(tenants.c.id == tenant_id).with_for_update()
    ).first()
    if state is None:
        raise NotFound(f"tenant {tenant_id[:64]} not found")
    if state_of(state.move_state) is not MoveState.FROZEN:
        raise Conflict(f"tenant {tenant_id} is exported only once frozen for its move")
    shared = dict(connection.execute(select(pools.c.id, pools.c.name)).all())
    tables: dict[str, list[Row]] = {}
    for table, owned in COPIED:
        rows = connection.execute(select(table).where(owned(tenant_id))).all()
        tables[table.name] = [
            _exported(table, tenant_id, dict(row._mapping), shared, keys) for row in rows
        ]
    return TenantExport(tenant_id=tenant_id, tables=tables)


def _exported(
    table: Table, tenant_id: str, row: Row, shared: Mapping[str, str], keys: Callable[[], Keyring]
) -> Row:
    if table is tenants:
        row.update(move_state=None, move_cell=None)
    if table.name in CHILDREN:
        row.pop("tenant_id", None)  # its parent's: a cell before 0035 has no such column
    if table is pool_shares:
        row["pool"] = shared[row.pop("pool_id")]
    if table is artifacts:
        row["location"] = ArtifactLocation.BLOB_STORE.value  # its bytes are sent there
    if table.name in SEALED_TABLES and row.get("key_id") is not None:
        sealed = Sealed(row["key_id"], bytes(row["nonce"]), bytes(row["ciphertext"]))
        opened = keys().open(sealed, associated(table.name, tenant_id, row))
        row[SEALED_VALUE] = base64.b64encode(opened).decode()
        for column in SEALED_COLUMNS:
            row.pop(column)
    return {name: _json(value) for name, value in row.items()}


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value
