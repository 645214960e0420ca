"""Alembic environment: runs revisions on the engine handed over by ``upgrade_to_head``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from herder.store.schema import metadata

_MIGRATION_LOCK = 726172  # PostgreSQL advisory lock: processes starting at once migrate in turn

engine = context.config.attributes["engine"]
assert isinstance(engine, Engine)

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
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        if postgres:
            connection.exec_driver_sql(f"SELECT pg_advisory_unlock({_MIGRATION_LOCK})")
            connection.commit()
