"""Alembic revisions, applied at start by ``Database.migrate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config

if TYPE_CHECKING:
    from herder.store.database import Database

_HERE = Path(__file__).parent


def alembic_config(database: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    config.attributes["engine"] = database.engine
    return config


def upgrade_to_head(database: Database) -> None:
    command.upgrade(alembic_config(database), "head")
