"""Keeping a history table's shadow (``shadow``) in step with it while servers go on
writing: a trigger mirrors each row written, and the rows there were are copied in batches,
each its own short transaction.

Why every row ends in the shadow once, in its newest version:

- The mirror runs after each row is written, in the writer's transaction: the row's new
  version is upserted by the shadow's primary key, a deleted row deleted. ``CREATE TRIGGER``
  waits for the writers in flight, so once it commits every row is either committed already,
  for the copy to read, or mirrored.
- A batch reads the next rows in key order ``FOR KEY SHARE`` and inserts them ``ON CONFLICT
  DO NOTHING``. A delete of one of them waits for the batch to commit, and its mirror then
  deletes the copy; a delete committed first hides the row from the batch. An update (no
  key changes) does not wait: if its mirror's upsert came first, the batch's insert finds
  that row (waiting for its commit when it has none yet) and leaves it; if the batch's
  insert came first, the upsert waits for the batch and overwrites it. A row updated and
  committed after the batch's snapshot is locked, and read, in its newest version.
- Runs' unique keys go into the guard tables from both sides (``guard_fill``).
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, text

from herder.store.history.guard_fill import record_keys_written
from herder.store.history.guards import record_keys_read
from herder.store.history.partitions import HistoryTable
from herder.store.history.shadow import columns, shadow_of
from herder.store.schema import metadata

COPY_BATCH_ROWS = 5_000


class Copied(NamedTuple):
    rows: int
    last_key: object | None  # None: the batch reached the end of the table


def mirror_name(history: HistoryTable) -> str:
    """The trigger's and its function's."""
    return f"{history.name}_to_shadow"


def install_mirror(connection: Connection, history: HistoryTable) -> None:
    """The trigger mirroring writes into the shadow (again, when it is there already)."""
    shadow, name = shadow_of(history), mirror_name(history)
    listed = columns(connection, history.name)
    key = history.primary_key
    changed = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in listed if c not in key)
    old_key = ", ".join(f'OLD."{c}"' for c in key)
    new_key = ", ".join(f'NEW."{c}"' for c in key)
    keys = record_keys_written() if history.name == "runs" else ""
    connection.execute(
        text(
            f'CREATE OR REPLACE FUNCTION "{name}"() RETURNS trigger LANGUAGE plpgsql AS $$\n'
            "BEGIN\n"
            f"  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND ({old_key}) <> ({new_key})) THEN\n"
            f'    DELETE FROM "{shadow.name}" WHERE ({_listed(key)}) = ({old_key});\n'
            "  END IF;\n"
            "  IF TG_OP <> 'DELETE' THEN\n"
            f'    INSERT INTO "{shadow.name}" ({_listed(listed)})'
            f" VALUES ({', '.join(f'NEW.{_quoted(c)}' for c in listed)})\n"
            f"      ON CONFLICT ({_listed(key)}) DO UPDATE SET {changed};\n"
            f"{keys}"
            "  END IF;\n"
            "  RETURN NULL;\n"
            "END;\n$$"
        )
    )
    connection.execute(
        text(
            f'CREATE OR REPLACE TRIGGER "{name}" AFTER INSERT OR UPDATE OR DELETE'
            f' ON "{history.name}" FOR EACH ROW EXECUTE FUNCTION "{name}"()'
        )
    )


def remove_mirror(connection: Connection, history: HistoryTable) -> None:
    name = mirror_name(history)
    connection.execute(text(f'DROP TRIGGER IF EXISTS "{name}" ON "{history.name}"'))
    connection.execute(text(f'DROP FUNCTION IF EXISTS "{name}"()'))


def copy_batch(connection: Connection, history: HistoryTable, after: object | None) -> Copied:
    """Copy the next ``COPY_BATCH_ROWS`` rows after the key ``after`` (from the first when
    None), in the plain table's key order, with their runs' keys for runs."""
    key = _copy_key(history)
    listed = _listed(columns(connection, history.name))
    bounds: dict[str, object] = {"skip": COPY_BATCH_ROWS - 1}
    since = "true"
    if after is not None:
        since, bounds["after"] = f'"{key}" > :after', after
    last = connection.execute(
        text(
            f'SELECT "{key}" FROM "{history.name}" WHERE {since}'
            f' ORDER BY "{key}" OFFSET :skip LIMIT 1'
        ),
        bounds,
    ).scalar()
    until = ""
    if last is not None:
        until, bounds["last"] = f' AND "{key}" <= :last', last
    del bounds["skip"]
    keys = record_keys_read("source") if history.name == "runs" else []
    steps = [
        f'source AS (SELECT {listed} FROM "{history.name}" WHERE {since}{until}'
        f' ORDER BY "{key}" FOR KEY SHARE)',
        f'copied AS (INSERT INTO "{shadow_of(history).name}" ({listed})'
        f" SELECT {listed} FROM source ON CONFLICT DO NOTHING)",
        *(f"keys_{number} AS ({statement})" for number, statement in enumerate(keys)),
    ]
    rows = connection.execute(
        text(f"WITH {', '.join(steps)} SELECT count(*) FROM source"), bounds
    ).scalar_one()
    return Copied(rows, last)


def _copy_key(history: HistoryTable) -> str:
    """The plain table's primary key: one column in every history table."""
    (column,) = metadata.tables[history.name].primary_key.columns
    return column.name


def _listed(names: list[str] | tuple[str, ...]) -> str:
    return ", ".join(_quoted(name) for name in names)


def _quoted(name: str) -> str:
    return f'"{name}"'
