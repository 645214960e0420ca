"""Alembic environment: runs revisions on the engine handed over by ``upgrade_to_head``, or,
on a schema a newer release made, checks that this server may run on it
(``compatibility``)."""

from __future__ import annotations

import logging

from alembic import context
from sqlalchemy import Connection, Engine, delete, insert, inspect, select

from herder.store.migrations.compatibility import judge, oldest_server
from herder.store.schema import metadata, schema_compatibility

_MIGRATION_LOCK = 726172  # PostgreSQL advisory lock: processes starting at once migrate in turn

log = logging.getLogger("herder.store.migrations")
engine = context.config.attributes["engine"]
assert isinstance(engine, Engine)
script = context.script


def _recorded_floor(connection: Connection) -> str | None:
    if not inspect(connection).has_table(schema_compatibility.name):
        return None
    floor: str | None = connection.execute(
        select(schema_compatibility.c.oldest_server)
    ).scalar_one_or_none()
    return floor


def _record_floor(connection: Connection) -> None:
    """For the revision reached (a test may migrate to one short of the head)."""
    reached = context.get_context().get_current_revision()
    if reached is None or not inspect(connection).has_table(schema_compatibility.name):
        return
    floor = oldest_server(script, reached)
    connection.execute(delete(schema_compatibility))
    connection.execute(insert(schema_compatibility).values(oldest_server=floor))


with engine.connect() as connection:
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({_MIGRATION_LOCK})")
        connection.commit()
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=not postgres,
            transaction_per_migration=True,
        )
        current = context.get_context().get_current_revision()
        verdict = judge(script, current, _recorded_floor(connection))
        connection.commit()
        if verdict.migrate:
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
            _record_floor(connection)
            connection.commit()
        else:
            log.warning("%s", verdict.explanation)
    finally:
        if postgres:
            connection.exec_driver_sql(f"SELECT pg_advisory_unlock({_MIGRATION_LOCK})")
            connection.commit()
