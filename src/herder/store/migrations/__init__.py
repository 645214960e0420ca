"""Alembic revisions, applied at start by ``Database.migrate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # Alembic loads when a process migrates, not with every store import
    from alembic.config import Config
    from sqlalchemy import Engine


class Database(Protocol):
    """What a migration needs of ``store.database.Database`` (which imports this module)."""

    @property
    def engine(self) -> Engine: ...


_HERE = Path(__file__).parent


def alembic_config(database: Database) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_HERE))
    config.attributes["engine"] = database.engine
    return config


def upgrade_to_head(database: Database) -> None:
    from alembic import command

    command.upgrade(alembic_config(database), "head")
