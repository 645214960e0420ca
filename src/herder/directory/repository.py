"""The directory's one repository: regions and cells created and listed, tenants placed and
looked up. Driver errors are wrapped here, where they enter: a directory out of reach is
``TemporarilyUnavailable`` (503), a name taken meanwhile a ``Conflict``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, create_engine, exc, func, insert, select
from sqlalchemy.engine import make_url

from herder.directory.schema import cells, metadata, regions, tenant_homes
from herder.domain.cells import Cell, Placement
from herder.domain.errors import Conflict, NotFound, TemporarilyUnavailable
from herder.store.database import normalize_url

_POOL_TIMEOUT_SECONDS = 5.0  # a directory out of reach answers 503 soon, not after 30 s


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
        with self._connection() as connection:
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

    def home_of(self, tenant_id: str) -> Cell | None:
        """The cell ``tenant_id`` lives in, None for a tenant the directory does not know."""
        query = (
            select(cells)
            .join(tenant_homes, tenant_homes.c.cell == cells.c.name)
            .where(tenant_homes.c.tenant_id == tenant_id)
        )
        with self._connection() as connection:
            row = connection.execute(query).first()
        return None if row is None else _cell(row)


def _cell(row: Any) -> Cell:
    values = dict(row._mapping)
    created_at: datetime = values["created_at"]
    if created_at.tzinfo is None:  # SQLite keeps no zone: it was written in UTC
        values["created_at"] = created_at.replace(tzinfo=UTC)
    return Cell.model_validate(values)
