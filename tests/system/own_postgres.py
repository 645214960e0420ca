"""A PostgreSQL server of a test's own (``scripts/test-postgres.sh``), to crash and resume
under a running system: stopped at once (``pg_ctl -m immediate``, as a kill -9 would) and
started again on the same port; durable, so a commit acknowledged before a crash is there
after it."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.system.conftest import scripted_database

SCRIPT = Path(__file__).parents[2] / "scripts" / "test-postgres.sh"


@dataclass
class OwnPostgres:
    directory: Path
    url: str

    def crash(self) -> None:
        subprocess.run([SCRIPT, "crash", self.directory], check=True)

    def resume(self) -> None:
        subprocess.run([SCRIPT, "resume", self.directory], check=True)


@contextlib.contextmanager
def own_postgres_server() -> Iterator[OwnPostgres]:
    directory = Path(tempfile.mkdtemp(prefix="herder-test-postgres-"))  # postgres must reach it
    start, stop = (SCRIPT, "start", directory), (SCRIPT, "stop", directory)
    with scripted_database(start, stop, "PostgreSQL server of the test's own", DURABLE="1") as url:
        yield OwnPostgres(directory, url)
