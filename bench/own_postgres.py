"""A PostgreSQL server of the bench's own (``scripts/test-postgres.sh``, as
``tests/system/own_postgres.py`` uses it), for a scenario that crashes one under a running
system: stopped at once (``pg_ctl -m immediate``, as a kill -9 of the postmaster would) and
started again on the same port; durable, so a commit acknowledged before a crash is there
after it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "scripts" / "test-postgres.sh"
SCRIPT_SECONDS = 180  # initdb and a start, on a loaded box


@dataclass(frozen=True)
class OwnPostgres:
    directory: Path
    url: str

    def crash(self) -> None:
        subprocess.run([SCRIPT, "crash", self.directory], check=True, timeout=SCRIPT_SECONDS)

    def resume(self) -> None:
        subprocess.run([SCRIPT, "resume", self.directory], check=True, timeout=SCRIPT_SECONDS)


@contextlib.contextmanager
def own_postgres() -> Iterator[OwnPostgres]:
    """A new server in a directory of its own (the postgres user must reach it), stopped and
    removed however the scenario ends."""
    directory = Path(tempfile.mkdtemp(prefix="herder-bench-postgres-"))
    try:
        started = subprocess.run(
            [SCRIPT, "start", directory], capture_output=True, text=True, check=False,
            timeout=SCRIPT_SECONDS, env={**os.environ, "DURABLE": "1"},
        )  # fmt: skip
        if started.returncode != 0:
            raise RuntimeError(f"no PostgreSQL server of the bench's own: {started.stderr[-2000:]}")
        yield OwnPostgres(directory, started.stdout.strip())
    finally:
        subprocess.run([SCRIPT, "stop", directory], check=False, timeout=60)
