"""The guard tables of runs' unique keys (``guards``) made and filled online, for the
conversion (``conversion``): made empty before runs are copied, filled with the keys of the
rows the copy reads and of those the mirror writes (``mirror``), and taken over by the
guards' own trigger when the partitioned runs is swapped in. Until then the plain runs'
unique indexes hold the keys; a key is recorded ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from herder.store.history.guards import GUARD_TABLES, RUN_GUARDS, make_guard_tables
from herder.store.history.partitions import FIRE_KEYS
from herder.store.history.shadow import exists, slice_up

# The fires' slices, made before the copy fills them: the rows' weeks, not the default's.
_FIRES = "(SELECT scheduled_for FROM runs WHERE schedule_id IS NOT NULL)"


def guard_tables_exist(connection: Connection) -> bool:
    return all(exists(connection, name) for name in GUARD_TABLES)


def create_guard_tables(connection: Connection, now: datetime) -> None:
    """The guard tables, empty, with the fires' slices the runs there are need."""
    make_guard_tables(connection)
    slice_up(connection, FIRE_KEYS, _FIRES, now)


def record_keys_written() -> str:
    """PL/pgSQL recording the keys of the row a trigger sees as ``NEW``: a run inserted, or
    one whose key changed (none does). Not those of every update: the copy may be recording
    the same key meanwhile, and a server's transaction would wait on it."""
    steps = []
    for name, columns, _ in RUN_GUARDS:
        present = " AND ".join(f"NEW.{c} IS NOT NULL" for c in columns)
        values = ", ".join(f"NEW.{c}" for c in columns)
        before = ", ".join(f"OLD.{c}" for c in columns)
        new = f"TG_OP = 'INSERT' OR ({values}) IS DISTINCT FROM ({before})"
        steps.append(
            f"    IF {present} AND ({new}) THEN\n"
            f"      INSERT INTO {name} VALUES ({values}, NEW.id) ON CONFLICT DO NOTHING;\n"
            f"    END IF;\n"
        )
    return "".join(steps)
