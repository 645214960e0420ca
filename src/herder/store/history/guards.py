"""The unique keys of runs that a time-partitioned ``runs`` cannot hold on PostgreSQL (a
unique key there must include the partition key, the id, which would make it unique per
run and guard nothing): each is a small table of its own whose primary key is the unique
key, taken by a trigger before the run is inserted.

A run whose key is already taken is skipped (the trigger returns NULL), which is what
``INSERT … ON CONFLICT DO NOTHING`` — the only way runs are inserted — did with the unique
indexes: a second insert of the same key waits for the first's transaction and then skips
(or goes ahead if the first rolled back). A double fire stays impossible, across slices too.
SQLite keeps the unique indexes on ``runs``.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from herder.store.history.partitions import FIRE_KEYS, create_default_partition

# (guard table, its key columns in runs, their SQL types)
RUN_GUARDS = (
    ("run_fire_keys", ("schedule_id", "scheduled_for"), ("varchar(40)", "timestamptz")),
    ("run_idempotency_keys", ("tenant_id", "idempotency_key"), ("varchar(40)", "varchar(255)")),
    (
        "run_task_keys",
        ("workflow_run_id", "task_name", "map_index", "repair"),
        ("varchar(40)", "varchar(128)", "integer", "integer"),
    ),
)
# The declared unique keys of runs the guards stand for; on PostgreSQL they are plain
# indexes of the same names, for the reads that look runs up by them.
GUARDED_UNIQUE_KEYS = (
    "uq_runs_tenant_id_idempotency_key",
    "uq_runs_schedule_id_scheduled_for",
    "ix_runs_workflow_run_id_task_name_map_index_repair",
)
GUARD_TABLES = tuple(name for name, _, _ in RUN_GUARDS)
_TRIGGER_FUNCTION = "runs_take_unique_keys"


def make_guard_tables(connection: Connection) -> None:
    """The guard tables, empty. The fires' guard is sliced by nominal time
    (``partitions.FIRE_KEYS``); a row no slice holds yet waits in its default partition."""
    for name, columns, types in RUN_GUARDS:
        declared = ", ".join(f"{c} {t} NOT NULL" for c, t in zip(columns, types, strict=True))
        sliced = f" PARTITION BY RANGE ({FIRE_KEYS.key})" if name == FIRE_KEYS.name else ""
        connection.execute(
            text(
                f"CREATE TABLE {name} ({declared}, run_id varchar(40) NOT NULL,"
                f" CONSTRAINT pk_{name} PRIMARY KEY ({', '.join(columns)})){sliced}"
            )
        )
    create_default_partition(connection, FIRE_KEYS)


def record_keys_read(source: str) -> list[str]:
    """Statements recording in the guards the keys of the runs ``source`` (a table or a
    CTE) holds; a key already recorded is left as it is."""
    statements = []
    for name, columns, _ in RUN_GUARDS:
        listed = ", ".join(columns)
        present = " AND ".join(f"{c} IS NOT NULL" for c in columns)
        statements.append(
            f"INSERT INTO {name} ({listed}, run_id) SELECT {listed}, id FROM {source}"
            f" WHERE {present} ON CONFLICT DO NOTHING"
        )
    return statements


def take_keys_on_insert(connection: Connection) -> None:
    """The trigger that takes a new run's keys before it is inserted, skipping a run whose
    key is taken."""
    connection.execute(text(_trigger_function()))
    connection.execute(
        text(
            f"CREATE TRIGGER {_TRIGGER_FUNCTION} BEFORE INSERT ON runs"
            f" FOR EACH ROW EXECUTE FUNCTION {_TRIGGER_FUNCTION}()"
        )
    )


def _trigger_function() -> str:
    """Take each key the new run has; when one is taken already, give back the ones this
    run took and skip the row."""
    steps: list[str] = []
    taken: list[str] = []
    for name, columns, _ in RUN_GUARDS:
        present = " AND ".join(f"NEW.{c} IS NOT NULL" for c in columns)
        values = ", ".join(f"NEW.{c}" for c in columns)
        give_back = "".join(f"    {release}\n" for release in taken)
        steps.append(
            f"  IF {present} THEN\n"
            f"    INSERT INTO {name} VALUES ({values}, NEW.id) ON CONFLICT DO NOTHING;\n"
            f"    IF NOT FOUND THEN\n{give_back}      RETURN NULL;\n    END IF;\n"
            f"  END IF;\n"
        )
        listed = ", ".join(columns)
        taken.append(f"  DELETE FROM {name} WHERE ({listed}) = ({values}) AND run_id = NEW.id;")
    return (
        f"CREATE FUNCTION {_TRIGGER_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "BEGIN\n" + "".join(steps) + "  RETURN NEW;\nEND;\n$$"
    )
