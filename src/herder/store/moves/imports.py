"""A moving tenant's definitions written in the cell it goes to: a document's rows checked
(every one the tenant's), made into this cell's rows (its pools' ids, sealed values sealed
with its keyring, the tenant arriving or returning, its schedules not yet due) and written
in the import's transaction — inserted, or in place of what a cell it left kept of it; or
everything an arriving tenant's import made removed."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    LargeBinary,
    Table,
    Update,
    delete,
    exc,
    insert,
    select,
    update,
)

from herder.domain.errors import Conflict, Invalid
from herder.domain.moves import MoveState, Row, TenantExport
from herder.keyring import Keyring
from herder.store.dialect import Among, update_rows
from herder.store.moves.copied import (
    CHILDREN,
    COPIED,
    SEALED_TABLES,
    SEALED_VALUE,
    TABLES,
    associated,
    state_of,
)
from herder.store.schema import audit_log, pool_shares, pools, schedules, tenants
from herder.store.types import UtcDateTime


def here(connection: Connection, tenant_id: str) -> tuple[MoveState | None, str | None] | None:
    """The tenant's state here and the other cell of its move, its row held; None when it
    is not here."""
    row = connection.execute(
        select(tenants.c.move_state, tenants.c.move_cell)
        .where(tenants.c.id == tenant_id)
        .with_for_update()
    ).first()
    return None if row is None else (state_of(row.move_state), row.move_cell)


def pool_ids(connection: Connection) -> dict[str, str]:
    """This cell's pools: each name's id."""
    return dict(connection.execute(select(pools.c.name, pools.c.id)).all())


def checked(document: TenantExport) -> dict[str, list[Row]]:
    """Each table's rows, every one the document's tenant's: no other table, no column the
    table lacks, no row of another tenant, no child of another tenant's row."""
    tenant_id = document.tenant_id
    unknown = sorted(set(document.tables) - set(TABLES))
    if unknown:
        raise Invalid(f"a move copies no table {unknown[0][:64]}", field="tables")
    rows = {name: document.rows(name) for name in TABLES}
    tenant_rows = rows["tenants"]
    if len(tenant_rows) != 1 or tenant_rows[0].get("id") != tenant_id:
        raise Invalid("the document holds its tenant's row, and only it", field="tables.tenants")
    if tenant_rows[0].get("is_system"):
        raise Invalid("the system tenant belongs to its cell: it never moves")
    for name, table_rows in rows.items():
        allowed = set(TABLES[name].c.keys()) | _extra_columns(name)
        for row in table_rows:
            if extra := sorted(set(row) - allowed):
                raise Invalid(f"{name} has no column {extra[0][:64]}", field=f"tables.{name}")
            if (
                name != "tenants"
                and "tenant_id" in TABLES[name].c
                and row.get("tenant_id", _parents_tenant(name, tenant_id)) != tenant_id
            ):
                raise Invalid(f"a row of {name} belongs to another tenant", field=f"tables.{name}")
    for name, (column, parent) in CHILDREN.items():
        owners = {row.get("id") for row in rows[parent]}
        if any(row.get(column) not in owners for row in rows[name]):
            raise Invalid(f"a row of {name} hangs from another tenant's", field=f"tables.{name}")
    return rows


def _parents_tenant(table: str, tenant_id: str) -> str | None:
    """A child row's tenant when its document leaves it out: its parent's, checked below (a
    cell before 0035 has no ``job_labels.tenant_id``, and ``exports`` sends none)."""
    return tenant_id if table in CHILDREN else None


def has_sealed(rows: Mapping[str, list[Row]]) -> bool:
    return any(SEALED_VALUE in row for name in SEALED_TABLES for row in rows[name])


def write_tenant(
    connection: Connection,
    document: TenantExport,
    rows: Mapping[str, list[Row]],
    pool_ids: Mapping[str, str],
    keyring: Keyring | None,
    arrival: MoveState,
) -> None:
    """The checked rows written, parents first, the tenant ``arrival`` (arriving or
    returning) from the document's cell: ``Conflict`` for an id or a name another tenant
    holds here. An arriving tenant's rows are inserted. A returning one's take the place of
    what this cell kept of it since it left, its history kept: its row and its schedules (their own
    events hang from them) updated in place, what it deleted meanwhile deleted, its other
    rows made again from the document."""
    tenant_id = document.tenant_id
    returning = arrival is MoveState.RETURNING
    try:
        schedules_here = _clear(connection, document, rows) if returning else set()
        for table, _ in COPIED:
            values = [
                _stored(table, tenant_id, row, pool_ids, keyring, document.from_cell, arrival)
                for row in rows[table.name]
            ]
            if returning and table is tenants:
                connection.execute(
                    update(tenants).where(tenants.c.id == tenant_id).values(values[0])
                )
            elif returning and table is schedules:
                _update_schedules(connection, [v for v in values if v["id"] in schedules_here])
                new = [v for v in values if v["id"] not in schedules_here]
                if new:
                    connection.execute(insert(schedules), new)
            elif values:
                connection.execute(insert(table), values)
    except exc.IntegrityError as error:
        raise Conflict(
            f"the document names an id or a name another tenant holds in this cell "
            f"({type(error.orig).__name__})"
        ) from error


def _clear(
    connection: Connection, document: TenantExport, rows: Mapping[str, list[Row]]
) -> set[str]:
    """What this cell kept of a returning tenant made ready for the document's rows: its
    schedules the document lacks deleted (with their events, as a schedule's deletion
    does), every other copied row of it but its own deleted (nothing of its history hangs
    from them); the ids of the schedules kept, to be updated."""
    tenant_id = document.tenant_id
    kept = {str(row["id"]) for row in rows["schedules"]}
    stored = set(
        connection.execute(
            select(schedules.c.id).where(schedules.c.tenant_id == tenant_id)
        ).scalars()
    )
    stale = Among(connection.dialect.name, schedules.c.id, "stale")
    for batch in stale.batches(sorted(stored - kept)):
        connection.execute(delete(schedules).where(stale.condition), batch)
    for table, owned in reversed(COPIED):
        if table is not tenants and table is not schedules:
            connection.execute(delete(table).where(owned(tenant_id)))
    return stored & kept


def _update_schedules(connection: Connection, values: list[Row]) -> None:
    """The returning tenant's schedules set to the document's, in one statement on
    PostgreSQL (``update_rows``)."""
    if not values:
        return
    kinds = {name: schedules.c[name].type for name in values[0]}

    def statement(row: Mapping[str, ColumnElement[Any]]) -> Update:
        return (
            update(schedules)
            .where(schedules.c.id == row["id"], schedules.c.tenant_id == row["tenant_id"])
            .values({name: column for name, column in row.items() if name != "id"})
            .returning(schedules.c.id)
        )

    update_rows(connection, kinds, values, statement)


def remove(connection: Connection, tenant_id: str) -> None:
    """Everything of an arriving tenant here: what the import made, and the audit entries
    its move left in its log (a system admin's calls naming it)."""
    connection.execute(delete(audit_log).where(audit_log.c.tenant_id == tenant_id))
    for table, owned in reversed(COPIED):
        connection.execute(delete(table).where(owned(tenant_id)))


def _extra_columns(table: str) -> set[str]:
    """What a document's rows hold in place of a column: an opened value, a pool's name."""
    if table in SEALED_TABLES:
        return {SEALED_VALUE}
    return {"pool"} if table == "pool_shares" else set()


def _stored(
    table: Table,
    tenant_id: str,
    row: Row,
    pool_ids: Mapping[str, str],
    keyring: Keyring | None,
    from_cell: str,
    arrival: MoveState,
) -> Row:
    values = {
        name: value if value is None or name not in table.c else _column_value(table, name, value)
        for name, value in row.items()
    }
    if table is tenants:
        values.update(move_state=arrival.value, move_cell=from_cell)
    if table is schedules:  # due here once the tenant is taken in (``states.due_again``)
        values["next_due_at"] = None
    if table is pool_shares:
        values["pool_id"] = pool_ids[values.pop("pool")]
    if table.name in CHILDREN and "tenant_id" in table.c:
        values["tenant_id"] = tenant_id  # its parent's, checked above (``exports``)
    if SEALED_VALUE in values:
        assert keyring is not None
        try:
            opened = base64.b64decode(values.pop(SEALED_VALUE), validate=True)
        except (TypeError, ValueError) as error:
            raise Invalid(f"a sealed value of {table.name} is not base64") from error
        sealed = keyring.seal(opened, associated(table.name, tenant_id, values))
        values.update(key_id=sealed.key_id, nonce=sealed.nonce, ciphertext=sealed.ciphertext)
    return values


def _column_value(table: Table, name: str, value: Any) -> Any:
    """A document's value as ``table.name`` holds it: ``Invalid`` for one of another type."""
    column_type = table.c[name].type
    try:
        if isinstance(column_type, UtcDateTime):
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                raise ValueError("a time with no zone")
            return moment
        if isinstance(column_type, LargeBinary):
            return base64.b64decode(value, validate=True)
        if isinstance(column_type, JSON):
            return value
        expected = column_type.python_type
    except (TypeError, ValueError, NotImplementedError) as error:
        raise Invalid(f"{table.name}.{name} is not a value it holds: {error}") from error
    allowed = (int, float) if expected is float else (expected,)
    if isinstance(value, bool) is not (expected is bool) or not isinstance(value, allowed):
        raise Invalid(f"{table.name}.{name} holds a {expected.__name__}")
    length = getattr(column_type, "length", None)
    if isinstance(value, str) and length is not None and len(value) > length:
        raise Invalid(f"{table.name}.{name} holds at most {length} characters")
    return value
