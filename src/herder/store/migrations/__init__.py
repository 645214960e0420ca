"""Alembic revisions, applied at start by ``Database.migrate``."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine


class Database(Protocol):
    """What a migration needs of ``store.database.Database`` (which imports this module)."""

    @property
    def engine(self) -> Engine: ...


_HERE = Path(__file__).parent


def alembic_config(database: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    config.attributes["engine"] = database.engine
    return config


def upgrade_to_head(database: Database) -> None:
    command.upgrade(alembic_config(database), "head")
