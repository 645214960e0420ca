"""A rolling upgrade's two releases on one database: the next release has migrated it (a
revision this server does not know), and this server still serves on it when that revision
is online, a run going through it from submission to success; a revision that is not online
makes this server refuse to start, saying which server it needs. On both stores."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory

from herder.store import migrations
from herder.store.database import Database
from herder.store.migrations import alembic_config
from herder.store.migrations.compatibility import SchemaTooNew, oldest_server
from herder.store.store import Store
from tests.conftest import TEST_KEYRING
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, report

NEXT_RELEASE = '''"""the next release: {what}"""

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None
online = {online}


def upgrade() -> None:
    op.add_column("runs", sa.Column("{column}", sa.Text(), nullable=True))
    op.create_table("{column}s", sa.Column("id", sa.String(40), primary_key=True))


def downgrade() -> None:
    raise NotImplementedError
'''


@contextmanager
def opened(url: str) -> Iterator[Database]:
    database = Database(url)
    try:
        yield database
    finally:
        database.dispose()


def this_head(database: Database) -> str:
    head = ScriptDirectory.from_config(alembic_config(database)).get_current_head()
    assert head is not None
    return head


def migrate_as_next_release(database: Database, versions: Path, *, online: bool) -> str:
    """Apply, as the next release would, one revision of its own past this server's head."""
    down = this_head(database)
    revision = f"{int(down) + 1:04d}"
    what = "an online expansion" if online else "a contraction"
    (versions / f"{revision}_next.py").write_text(
        NEXT_RELEASE.format(
            what=what, revision=revision, down=down, online=online, column=f"next_{revision}"
        )
    )
    config = alembic_config(database)
    ours = Path(migrations.__file__).parent / "versions"
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", os.pathsep.join([str(ours), str(versions)]))
    command.upgrade(config, "head")
    return revision


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    """A store of this release on a database the next release migrated, online."""
    versions = tmp_path / "next_release"
    versions.mkdir()
    with opened(database_url) as database:
        migrate_as_next_release(database, versions, online=True)
    store = Store(database_url, keyring=TEST_KEYRING)
    yield store
    store.close()


def test_this_release_serves_a_run_on_the_next_releases_online_schema(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="herder.store.migrations"):
        api.store.migrate()
    assert "newer than this server's" in caplog.text
    assert "runs on it beside the newer release" in caplog.text
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    (result,) = report(api, worker_id, completions=[completion(assignment)])
    assert result["status"] == 200
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["state"] == "succeeded"


def test_a_schema_past_a_revision_that_is_not_online_is_refused_saying_what_it_needs(
    database_url: str, tmp_path: Path
) -> None:
    with opened(database_url) as database:
        ours = this_head(database)
        contraction = migrate_as_next_release(database, tmp_path, online=False)
    with opened(database_url) as database, pytest.raises(SchemaTooNew) as refused:
        database.migrate()
    assert str(refused.value) == (
        f"the database's schema is at revision {contraction}, which this server (schema "
        f"{ours}) cannot run on: it needs a server of schema revision {contraction} or "
        "newer. Upgrade this server, or run the release that migrated the database"
    )


def test_the_floor_is_the_newest_revision_that_is_not_online(database_url: str) -> None:
    with opened(database_url) as database:
        script = ScriptDirectory.from_config(alembic_config(database))
        head = this_head(database)
        with database.read() as connection:
            recorded = (
                connection.exec_driver_sql("SELECT oldest_server FROM schema_compatibility")
                .scalars()
                .all()
            )
    offline = [
        revision.revision for revision in script.walk_revisions() if not revision.module.online
    ]
    assert oldest_server(script, head) == max(offline)
    assert recorded == [max(offline)]
