"""A tenant's move between cells as each cell stores it (docs/cells.md, "Moving a tenant";
the steps are the edge's, ``edge/moves.py``): its state shifted under its row's lock, its
definitions read once it froze (the export) and written in the other cell in one
transaction (the import), a partial import taken back, a program's bytes received.

The freeze and a schedule's fire are ordered by the firer's fence: the freeze touches each of
the tenant's schedules (``updated_at``) in its transaction, so a firer that read one before
the freeze advances nothing (its fence no longer holds), and one that reads after it finds
no due schedule of a tenant that is not at home (``ScheduleRepository.due``). So every
instant before the exported ``next_fire_at`` fired here and none at or after it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    LargeBinary,
    Table,
    delete,
    exc,
    insert,
    select,
)
from sqlalchemy import update as sql_update

from herder.clock import Clock
from herder.domain.artifacts import ArtifactLocation, artifact_key
from herder.domain.errors import Conflict, Invalid, NotFound, Unavailable
from herder.domain.moves import (
    MoveState,
    Row,
    TenantExport,
    may_shift,
    pools_lacking,
)
from herder.domain.schedules import ScheduleSpec
from herder.keyring import (
    Keyring,
    Sealed,
    associated_data,
    channel_associated_data,
    hook_associated_data,
)
from herder.store.artifacts import ArtifactRepository
from herder.store.cold.blobs import BlobStore
from herder.store.database import Database
from herder.store.schedule_fires import next_fire_values
from herder.store.schema import (
    alert_channels,
    alert_rules,
    api_keys,
    artifacts,
    audit_log,
    hooks,
    job_labels,
    jobs,
    limits,
    pool_shares,
    pools,
    schedules,
    secrets,
    tenant_budgets,
    tenants,
    triggers,
    workflow_versions,
    workflows,
)
from herder.store.types import UtcDateTime

SEALED_COLUMNS = ("key_id", "nonce", "ciphertext")
FENCE_STEP = timedelta(milliseconds=1)  # a stamp past one read, whatever the clock
SEALED_VALUE = "sealed_value"  # the opened value in a document, base64


def _owned(table: Table) -> Callable[[str], ColumnElement[bool]]:
    return lambda tenant_id: table.c.tenant_id == tenant_id


# What a move copies, in the order the import inserts it (the reverse: a partial import's
# removal): each table and its rows of one tenant. History (runs, events, schedules' own
# events, usage) stays in the cell it was made in.
COPIED: tuple[tuple[Table, Callable[[str], ColumnElement[bool]]], ...] = (
    (tenants, lambda tenant_id: tenants.c.id == tenant_id),
    (api_keys, _owned(api_keys)),
    (tenant_budgets, _owned(tenant_budgets)),
    (pool_shares, _owned(pool_shares)),
    (artifacts, _owned(artifacts)),
    (jobs, _owned(jobs)),
    (
        job_labels,
        lambda tenant_id: job_labels.c.job_id.in_(
            select(jobs.c.id).where(jobs.c.tenant_id == tenant_id)
        ),
    ),
    (workflows, _owned(workflows)),
    (
        workflow_versions,
        lambda tenant_id: workflow_versions.c.workflow_id.in_(
            select(workflows.c.id).where(workflows.c.tenant_id == tenant_id)
        ),
    ),
    (schedules, _owned(schedules)),
    (limits, _owned(limits)),
    (triggers, _owned(triggers)),
    (hooks, _owned(hooks)),
    (secrets, _owned(secrets)),
    (alert_channels, _owned(alert_channels)),
    (alert_rules, _owned(alert_rules)),
)
TABLES = {table.name: table for table, _ in COPIED}
# the rows a table's rows hang from: (column, parent table) — their ids must be the tenant's
CHILDREN = {"job_labels": ("job_id", "jobs"), "workflow_versions": ("workflow_id", "workflows")}


def _associated(table: str, tenant_id: str, row: Mapping[str, Any]) -> bytes:
    """What a sealed value of ``table`` is bound to (the same ids in both cells)."""
    if table == "secrets":
        return associated_data(tenant_id, str(row["name"]), int(row["version"]))
    if table == "hooks":
        return hook_associated_data(tenant_id, str(row["id"]))
    return channel_associated_data(tenant_id, str(row["id"]))


SEALED_TABLES = frozenset({"secrets", "hooks", "alert_channels"})


@dataclass(frozen=True)
class MoveStatus:
    tenant_id: str
    state: MoveState | None
    cell: str | None


class TenantMoves:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        keyring: Keyring | None,
        artifacts: ArtifactRepository,
        blobs: BlobStore | None,
        forget_tenant: Callable[[str], None],
    ) -> None:
        self._db = database
        self._clock = clock
        self._keyring = keyring
        self._artifacts = artifacts
        self._blobs = blobs
        self._forget_tenant = forget_tenant  # this process's recent keys of a tenant

    # --- state ---------------------------------------------------------------------------

    def status(self, tenant_id: str) -> MoveStatus:
        with self._db.read() as connection:
            row = connection.execute(
                select(tenants.c.move_state, tenants.c.move_cell).where(tenants.c.id == tenant_id)
            ).first()
        if row is None:
            raise NotFound(f"tenant {tenant_id[:64]} not found")
        return MoveStatus(tenant_id, _state(row.move_state), row.move_cell)

    def shift(
        self,
        tenant_id: str,
        wanted: MoveState | None,
        cell: str | None,
        target_pools: Sequence[str] | None = None,
    ) -> MoveStatus:
        """The tenant's state moved to ``wanted`` (towards or from ``cell``), under its row's
        lock: ``Conflict`` for a shift ``domain.moves.SHIFTS`` does not allow, for the
        system tenant, and (freezing) for pools ``target_pools`` lacks — before anything
        changed. A freeze touches the tenant's schedules: the firer's fence (above)."""
        with self._db.write() as connection:
            row = connection.execute(
                select(tenants).where(tenants.c.id == tenant_id).with_for_update()
            ).first()
            if row is None:
                raise NotFound(f"tenant {tenant_id[:64]} not found")
            if row.is_system:
                raise Conflict("the system tenant belongs to its cell: it never moves")
            current = _state(row.move_state)
            if not may_shift(current, row.move_cell, wanted, cell):
                raise Conflict(
                    f"tenant {tenant_id} is {current or 'at home'}"
                    f"{f' (cell {row.move_cell})' if row.move_cell else ''}: it cannot be "
                    f"made {wanted or 'at home'}{f' (cell {cell})' if cell else ''}"
                )
            if wanted is MoveState.FROZEN and current is None and target_pools is not None:
                named = [row.default_pool, *_share_pools(connection, tenant_id)]
                if lacking := pools_lacking(named, target_pools):
                    raise Conflict(
                        f"cell {cell} lacks the pools tenant {tenant_id} uses: "
                        f"{', '.join(lacking)}; create them there first",
                        field="pools",
                    )
            now = self._clock.now()
            connection.execute(
                sql_update(tenants)
                .where(tenants.c.id == tenant_id)
                .values(
                    move_state=None if wanted is None else wanted.value,
                    move_cell=None if wanted is None else cell,
                )
            )
            if wanted is MoveState.FROZEN and current is None:
                _touch_schedules(connection, tenant_id, now)
            if wanted is None:  # home again (a move taken back) or here now (arrived)
                _due_again(connection, tenant_id)
        self._forget_tenant(tenant_id)
        return MoveStatus(tenant_id, wanted, None if wanted is None else cell)

    # --- export --------------------------------------------------------------------------

    def export(self, tenant_id: str) -> TenantExport:
        """The frozen tenant's definitions, read in one transaction (``Conflict`` unless it
        is frozen: nothing of it changes then). Sealed values are opened with this cell's
        keyring, to be sealed again by the target's."""
        tables: dict[str, list[Row]] = {}
        with self._db.write() as connection:
            state = connection.execute(
                select(tenants.c.move_state).where(tenants.c.id == tenant_id).with_for_update()
            ).first()
            if state is None:
                raise NotFound(f"tenant {tenant_id[:64]} not found")
            if _state(state.move_state) is not MoveState.FROZEN:
                raise Conflict(f"tenant {tenant_id} is exported only once frozen for its move")
            shared = dict(connection.execute(select(pools.c.id, pools.c.name)).all())
            for table, owned in COPIED:
                rows = connection.execute(select(table).where(owned(tenant_id))).all()
                tables[table.name] = [
                    self._exported(table, tenant_id, dict(row._mapping), shared) for row in rows
                ]
        return TenantExport(tenant_id=tenant_id, tables=tables)

    def _exported(self, table: Table, tenant_id: str, row: Row, shared: Mapping[str, str]) -> Row:
        if table is tenants:
            row.update(move_state=None, move_cell=None)
        if table is pool_shares:
            row["pool"] = shared[row.pop("pool_id")]
        if table is artifacts:
            row["location"] = ArtifactLocation.BLOB_STORE.value  # its bytes are sent there
        if table.name in SEALED_TABLES and row.get("key_id") is not None:
            sealed = Sealed(row["key_id"], bytes(row["nonce"]), bytes(row["ciphertext"]))
            opened = self._keys().open(sealed, _associated(table.name, tenant_id, row))
            row[SEALED_VALUE] = base64.b64encode(opened).decode()
            for column in SEALED_COLUMNS:
                row.pop(column)
        return {name: _json(value) for name, value in row.items()}

    def artifact_content(self, tenant_id: str, sha256: str) -> Iterator[bytes]:
        """A frozen tenant's program, for the target (where it is kept: ``artifacts.read``)."""
        if self.status(tenant_id).state is not MoveState.FROZEN:
            raise Conflict(f"tenant {tenant_id}'s programs are exported only once it is frozen")
        _, content = self._artifacts.read(tenant_id, sha256)
        return content

    # --- import --------------------------------------------------------------------------

    def receive_artifact(self, tenant_id: str, sha256: str, content: IO[bytes]) -> None:
        """A moving tenant's program kept in this cell's blob store, before the import names
        it (its sha256 checked): ``Conflict`` for a tenant here that is not arriving."""
        digest = hashlib.sha256()
        for piece in iter(lambda: content.read(1 << 16), b""):
            digest.update(piece)
        if digest.hexdigest() != sha256:
            raise Invalid(f"the bytes sent are not artifact {sha256[:64]} (their sha256 differs)")
        with self._db.read() as connection:
            here = connection.execute(
                select(tenants.c.move_state).where(tenants.c.id == tenant_id)
            ).first()
        if here is not None and _state(here.move_state) is not MoveState.ARRIVING:
            raise Conflict(f"tenant {tenant_id} already lives in this cell")
        content.seek(0)
        self._store().put_stream(artifact_key(tenant_id, sha256), content)

    def import_(self, document: TenantExport) -> None:
        """The tenant as the document says, arriving, in one transaction: ``Conflict`` for a
        tenant here that is not this move's partial import (which is replaced: importing
        twice makes one tenant), an id or name another tenant holds, a pool or a program's
        bytes this cell lacks; ``Invalid`` for rows that are not the tenant's."""
        tenant_id = document.tenant_id
        rows = _checked(document)
        keyring = self._keys() if _has_sealed(rows) else None
        for sha256 in document.artifacts:
            if not _kept(self._store(), artifact_key(tenant_id, sha256)):
                raise Conflict(f"artifact {sha256[:64]}'s bytes were not sent before the import")
        with self._db.write() as connection:
            here = connection.execute(
                select(tenants.c.move_state, tenants.c.move_cell)
                .where(tenants.c.id == tenant_id)
                .with_for_update()
            ).first()
            if here is not None:
                if _state(here.move_state) is not MoveState.ARRIVING:
                    raise Conflict(f"tenant {tenant_id} already lives in this cell")
                if here.move_cell != document.from_cell:
                    raise Conflict(
                        f"tenant {tenant_id} is arriving here from cell {here.move_cell}"
                    )
                _remove(connection, tenant_id)  # this move's import, made again
            shared = dict(connection.execute(select(pools.c.name, pools.c.id)).all())
            if lacking := pools_lacking((row["pool"] for row in rows["pool_shares"]), shared):
                raise Conflict(f"this cell lacks the pools {', '.join(lacking)}", field="pools")
            try:
                for table, _ in COPIED:
                    values = [
                        _stored(table, tenant_id, row, shared, keyring, document.from_cell)
                        for row in rows[table.name]
                    ]
                    if values:
                        connection.execute(insert(table), values)
            except exc.IntegrityError as error:
                raise Conflict(
                    f"the document names an id or a name another tenant holds in this cell "
                    f"({type(error.orig).__name__})"
                ) from error

    def remove_import(self, tenant_id: str) -> None:
        """An arriving tenant's import taken back (a later step of its move failed)."""
        with self._db.write() as connection:
            here = connection.execute(
                select(tenants.c.move_state).where(tenants.c.id == tenant_id).with_for_update()
            ).first()
            if here is None:
                return  # nothing was imported, or it was taken back already
            if _state(here.move_state) is not MoveState.ARRIVING:
                raise Conflict(f"tenant {tenant_id} lives in this cell: only an import is removed")
            _remove(connection, tenant_id)
        self._forget_tenant(tenant_id)

    def _keys(self) -> Keyring:
        if self._keyring is None:
            raise Unavailable("this server has no secrets key: a tenant with secrets cannot move")
        return self._keyring

    def _store(self) -> BlobStore:
        if self._blobs is None:
            raise Unavailable("this process was started without a blob store for artifacts")
        return self._blobs


def _kept(blobs: BlobStore, key: str) -> bool:
    """Whether ``blobs`` has ``key``, its reading opened and closed at once."""
    pieces = blobs.stream(key)
    if pieces is None:
        return False
    next(pieces, None)
    close = getattr(pieces, "close", None)
    if close is not None:
        close()
    return True


def _state(value: str | None) -> MoveState | None:
    return None if value is None else MoveState(value)


def _share_pools(connection: Connection, tenant_id: str) -> list[str]:
    return list(
        connection.execute(
            select(pools.c.name)
            .join(pool_shares, pool_shares.c.pool_id == pools.c.id)
            .where(pool_shares.c.tenant_id == tenant_id)
        ).scalars()
    )


def _touch_schedules(connection: Connection, tenant_id: str, now: datetime) -> None:
    """Each of the tenant's schedules changed, their rows held: a firer's fence (the
    schedule's ``updated_at`` as it read it) no longer holds, whatever the clock says — the
    new stamp is past every one read; and none is due while the tenant is away (its
    ``next_due_at`` cleared, ``next_fire_at`` kept for the export), so the firers' reads by
    the index on (partition, next_due_at) never meet them."""
    stamps = connection.execute(
        select(schedules.c.updated_at).where(schedules.c.tenant_id == tenant_id).with_for_update()
    ).scalars()
    latest = max(stamps, default=None)
    stamp = now if latest is None or latest < now else latest + FENCE_STEP
    connection.execute(
        sql_update(schedules)
        .where(schedules.c.tenant_id == tenant_id)
        .values(updated_at=stamp, next_due_at=None)
    )


def _due_again(connection: Connection, tenant_id: str) -> None:
    """The tenant's schedules due again at their next fire (plus their jitter), as before
    it went away: a paused one has no next fire, and stays as it is."""
    waiting = connection.execute(
        select(schedules.c.id, schedules.c.spec, schedules.c.next_fire_at).where(
            schedules.c.tenant_id == tenant_id, schedules.c.next_fire_at.is_not(None)
        )
    ).all()
    for schedule_id, spec, nominal in waiting:
        due = next_fire_values(schedule_id, ScheduleSpec.model_validate(spec), nominal)
        connection.execute(
            sql_update(schedules)
            .where(schedules.c.id == schedule_id)
            .values(next_due_at=due["next_due_at"])
        )


def _remove(connection: Connection, tenant_id: str) -> None:
    """Everything of an arriving tenant here: what the import made, and the audit entries
    its move left in its log (a system admin's calls naming it)."""
    connection.execute(delete(audit_log).where(audit_log.c.tenant_id == tenant_id))
    for table, owned in reversed(COPIED):
        connection.execute(delete(table).where(owned(tenant_id)))


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


def _checked(document: TenantExport) -> dict[str, list[Row]]:
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
                and row.get("tenant_id") != tenant_id
            ):
                raise Invalid(f"a row of {name} belongs to another tenant", field=f"tables.{name}")
    for name, (column, parent) in CHILDREN.items():
        owners = {row.get("id") for row in rows[parent]}
        if any(row.get(column) not in owners for row in rows[name]):
            raise Invalid(f"a row of {name} hangs from another tenant's", field=f"tables.{name}")
    return rows


def _extra_columns(table: str) -> set[str]:
    """What a document's rows hold in place of a column: an opened value, a pool's name."""
    if table in SEALED_TABLES:
        return {SEALED_VALUE}
    return {"pool"} if table == "pool_shares" else set()


def _has_sealed(rows: Mapping[str, list[Row]]) -> bool:
    return any(SEALED_VALUE in row for name in SEALED_TABLES for row in rows[name])


def _stored(
    table: Table,
    tenant_id: str,
    row: Row,
    shared: Mapping[str, str],
    keyring: Keyring | None,
    from_cell: str,
) -> Row:
    values = {
        name: value if value is None or name not in table.c else _column_value(table, name, value)
        for name, value in row.items()
    }
    if table is tenants:
        values.update(move_state=MoveState.ARRIVING.value, move_cell=from_cell)
    if table is schedules:  # due here once the tenant is taken in (``_due_again``)
        values["next_due_at"] = None
    if table is pool_shares:
        values["pool_id"] = shared[values.pop("pool")]
    if SEALED_VALUE in values:
        assert keyring is not None
        try:
            opened = base64.b64decode(values.pop(SEALED_VALUE), validate=True)
        except (TypeError, ValueError) as error:
            raise Invalid(f"a sealed value of {table.name} is not base64") from error
        sealed = keyring.seal(opened, _associated(table.name, tenant_id, values))
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
