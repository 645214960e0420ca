"""The directory's one repository: regions and cells created and listed, tenants placed and
looked up, a tenant's move begun, flipped and ended. Driver errors are wrapped here, where
they enter: a directory out of reach is ``TemporarilyUnavailable`` (503), a name taken
meanwhile a ``Conflict``."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, create_engine, delete, exc, func, insert, select, update
from sqlalchemy.engine import make_url

from herder.directory.schema import (
    cells,
    metadata,
    previous_homes,
    regions,
    tenant_homes,
    tenant_moves,
)
from herder.domain.cells import Cell, Home, Placement, Residence
from herder.domain.errors import Conflict, NotFound, TemporarilyUnavailable
from herder.store.database import normalize_url

CELL_COLUMNS = [column.name for column in cells.c]
_POOL_TIMEOUT_SECONDS = 5.0  # a directory out of reach answers 503 soon, not after 30 s
# Edges starting at once make the tables in turn: each checks for them and makes what is
# missing while holding this (PostgreSQL's DDL is transactional, so the next one's checks see
# the first one's tables; unlocked, two both make ``regions`` and one fails)
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('herder directory schema', 0))"


@dataclass(frozen=True)
class Placed:
    new: list[Placement]
    elsewhere: dict[str, str]  # tenant id → the cell it lives in


class Directory:
    def __init__(self, url: str) -> None:
        normalized = normalize_url(url)
        options: dict[str, Any] = {"pool_pre_ping": True}
        if make_url(normalized).get_backend_name() == "sqlite":
            options["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            options["pool_timeout"] = _POOL_TIMEOUT_SECONDS
        self._engine = create_engine(normalized, **options)
        try:
            self._create_tables()
        except BaseException:
            self._engine.dispose()  # nothing left open by a start that failed
            raise

    def _create_tables(self) -> None:
        """The tables made if missing, by one edge at a time: on PostgreSQL under an
        advisory lock, on SQLite under its write lock, taken before the checks."""
        with self._connection() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")  # the driver began nothing yet
            else:
                connection.exec_driver_sql(_SCHEMA_LOCK)
            metadata.create_all(connection)

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        try:
            with self._engine.begin() as connection:
                yield connection
        except (exc.OperationalError, exc.InterfaceError) as error:
            raise TemporarilyUnavailable(f"the directory is unavailable: {error.orig}") from error

    def create_cell(self, name: str, region: str, api_url: str, now: datetime) -> Cell:
        """A new cell, in ``region`` (made when first named); the first cell made is the
        default one. ``Conflict`` for a name taken."""
        try:
            with self._connection() as connection:
                if (
                    connection.execute(
                        select(regions.c.name).where(regions.c.name == region)
                    ).first()
                    is None
                ):
                    connection.execute(insert(regions).values(name=region, created_at=now))
                first = not connection.execute(select(func.count()).select_from(cells)).scalar()
                cell = Cell(name=name, region=region, api_url=api_url.rstrip("/"),
                            is_default=first, created_at=now)  # fmt: skip
                connection.execute(insert(cells).values(**cell.model_dump()))
        except exc.IntegrityError as error:
            raise Conflict(f"a cell named {name!r} already exists", field="name") from error
        return cell

    def cells(self) -> list[Cell]:
        with self._connection() as connection:
            rows = connection.execute(select(cells).order_by(cells.c.name)).all()
        return [_cell(row) for row in rows]

    def cell(self, name: str) -> Cell:
        with self._connection() as connection:
            row = connection.execute(select(cells).where(cells.c.name == name)).first()
        if row is None:
            raise NotFound(f"cell {name[:64]} not found")
        return _cell(row)

    def default_cell(self) -> Cell | None:
        with self._connection() as connection:
            row = connection.execute(select(cells).where(cells.c.is_default)).first()
        return None if row is None else _cell(row)

    def tenants_per_cell(self) -> dict[str, int]:
        query = select(tenant_homes.c.cell, func.count()).group_by(tenant_homes.c.cell)
        with self._connection() as connection:
            return {cell: count for cell, count in connection.execute(query).all()}

    def place(self, tenant_ids: Sequence[str], cell: str, now: datetime) -> Placed:
        """Each tenant's home made ``cell``'s, but one placed already: one in ``cell``
        is left as it is, one in another cell is told in ``elsewhere`` (a move is not
        this). ``Conflict`` when one is placed meanwhile (try again)."""
        with self._connection() as connection:
            placed = dict(
                connection.execute(
                    select(tenant_homes.c.tenant_id, tenant_homes.c.cell).where(
                        tenant_homes.c.tenant_id.in_(tenant_ids)
                    )
                ).all()
            )
            new = [
                Placement(tenant_id=tenant, cell=cell, placed_at=now)
                for tenant in dict.fromkeys(tenant_ids)
                if tenant not in placed
            ]
            try:
                if new:
                    connection.execute(insert(tenant_homes), [one.model_dump() for one in new])
            except exc.IntegrityError as error:
                raise Conflict("a tenant was placed meanwhile; try again") from error
        elsewhere = {tenant: home for tenant, home in placed.items() if home != cell}
        return Placed(new=new, elsewhere=elsewhere)

    def home_of(self, tenant_id: str) -> Home | None:
        """Where ``tenant_id`` lives, whether it is moving and where it lived before (one
        query: a row per previous home); None for a tenant the directory does not know."""
        before = cells.alias("before")
        query = (
            select(
                cells,
                tenant_moves.c.to_cell,
                *(column.label(f"before_{column.name}") for column in before.c),
            )
            .select_from(
                tenant_homes.join(cells, tenant_homes.c.cell == cells.c.name)
                .outerjoin(tenant_moves, tenant_moves.c.tenant_id == tenant_homes.c.tenant_id)
                .outerjoin(previous_homes, previous_homes.c.tenant_id == tenant_homes.c.tenant_id)
                .outerjoin(before, before.c.name == previous_homes.c.cell)
            )
            .where(tenant_homes.c.tenant_id == tenant_id)
            .order_by(previous_homes.c.left_at.desc())
        )
        with self._connection() as connection:
            rows = connection.execute(query).all()
        if not rows:
            return None
        previous = [
            _cell({name: row._mapping[f"before_{name}"] for name in CELL_COLUMNS})
            for row in rows
            if row._mapping["before_name"] is not None
        ]
        home = {name: rows[0]._mapping[name] for name in CELL_COLUMNS}
        return Home(cell=_cell(home), moving_to=rows[0].to_cell, previous=previous)

    def residence_of(self, tenant_id: str) -> Residence | None:
        """Where ``tenant_id`` lives, by cell names (one query: a row per previous home), the
        names interned so that every tenant's refers to one copy; None for a tenant the
        directory does not know."""
        query = (
            select(tenant_homes.c.cell, tenant_moves.c.to_cell, previous_homes.c.cell)
            .select_from(
                tenant_homes.outerjoin(
                    tenant_moves, tenant_moves.c.tenant_id == tenant_homes.c.tenant_id
                ).outerjoin(previous_homes, previous_homes.c.tenant_id == tenant_homes.c.tenant_id)
            )
            .where(tenant_homes.c.tenant_id == tenant_id)
            .order_by(previous_homes.c.left_at.desc())
        )
        with self._connection() as connection:
            rows = connection.execute(query).all()
        if not rows:
            return None
        home, moving_to, _ = rows[0]
        return Residence(
            cell=sys.intern(home),
            moving_to=None if moving_to is None else sys.intern(moving_to),
            previous=tuple(sys.intern(before) for _, _, before in rows if before is not None),
        )

    def begin_move(self, tenant_id: str, from_cell: str, to_cell: str, now: datetime) -> None:
        """The tenant marked moving from ``from_cell`` to ``to_cell``: ``Conflict`` when it
        is moving elsewhere already. The same move begun again (one that stopped half way)
        goes on."""
        with self._connection() as connection:
            under_way = connection.execute(
                select(tenant_moves).where(tenant_moves.c.tenant_id == tenant_id)
            ).first()
            if under_way is not None:
                if (under_way.from_cell, under_way.to_cell) != (from_cell, to_cell):
                    raise Conflict(
                        f"tenant {tenant_id} is moving from cell {under_way.from_cell} to "
                        f"cell {under_way.to_cell} already"
                    )
                return
            try:
                connection.execute(
                    insert(tenant_moves).values(
                        tenant_id=tenant_id, from_cell=from_cell, to_cell=to_cell, started_at=now
                    )
                )
            except exc.IntegrityError as error:
                raise Conflict(f"tenant {tenant_id} began moving meanwhile") from error

    def move_under_way(self, tenant_id: str) -> tuple[str, str] | None:
        """(from, to) of the tenant's move under way, if any."""
        with self._connection() as connection:
            row = connection.execute(
                select(tenant_moves).where(tenant_moves.c.tenant_id == tenant_id)
            ).first()
        return None if row is None else (row.from_cell, row.to_cell)

    def flip(self, tenant_id: str, from_cell: str, to_cell: str, now: datetime) -> None:
        """The tenant's home made ``to_cell``, ``from_cell`` kept as a previous home, only
        when it lives in ``from_cell`` still (or in ``to_cell`` already: flipped before);
        the move stays under way until ``end_move``."""
        with self._connection() as connection:
            flipped = connection.execute(
                update(tenant_homes)
                .where(tenant_homes.c.tenant_id == tenant_id, tenant_homes.c.cell == from_cell)
                .values(cell=to_cell, placed_at=now)
            ).rowcount
            if not flipped:
                home = connection.execute(
                    select(tenant_homes.c.cell).where(tenant_homes.c.tenant_id == tenant_id)
                ).scalar()
                if home != to_cell:
                    raise Conflict(f"tenant {tenant_id} lives in cell {home}, not {from_cell}")
                return
            connection.execute(
                delete(previous_homes).where(
                    previous_homes.c.tenant_id == tenant_id,
                    previous_homes.c.cell.in_([from_cell, to_cell]),
                )
            )
            connection.execute(
                insert(previous_homes).values(tenant_id=tenant_id, cell=from_cell, left_at=now)
            )

    def end_move(self, tenant_id: str) -> None:
        """The tenant's move over (done, or taken back before the flip)."""
        with self._connection() as connection:
            connection.execute(delete(tenant_moves).where(tenant_moves.c.tenant_id == tenant_id))


def _cell(row: Any) -> Cell:
    values = dict(row) if isinstance(row, dict) else dict(row._mapping)
    created_at: datetime = values["created_at"]
    if created_at.tzinfo is None:  # SQLite keeps no zone: it was written in UTC
        values["created_at"] = created_at.replace(tzinfo=UTC)
    return Cell.model_validate(values)
