"""The server's home directory and SQLite database are private to the user running it.

A job runs on the same host as the server (``herder up``), so a database or home readable by
others would hand every tenant's job specs and environments (API keys, say) to any job.
Checked and corrected at every start, not only on creation: a home created by hand, or by an
older version, as 0755 with a 0644 database is made 0700 and 0600, and the log says so.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy.engine import make_url

from herder.credentials import FILE_MODE, HOME_MODE, restrict

log = logging.getLogger("herder.server")
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")  # the database and SQLite's own files


def sqlite_path(database_url: str) -> Path | None:
    """The database file of a SQLite URL (``None`` for PostgreSQL or an in-memory store)."""
    if not database_url.startswith("sqlite"):  # a PostgreSQL URL may list hosts libpq's way
        return None
    url = make_url(database_url)
    if url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).absolute()


def secure_home(home: Path, database_url: str) -> list[str]:
    """Make ``home`` 0700 and the SQLite database (with its -wal, -shm and -journal files)
    0600, creating the home and an empty database file that way if they are missing. Returns
    (and logs) what was corrected; refuses to go on when something cannot be corrected."""
    home.mkdir(parents=True, exist_ok=True, mode=HOME_MODE)
    corrected = [restrict(home, HOME_MODE)]
    database = sqlite_path(database_url)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True, mode=HOME_MODE)
        for suffix in SQLITE_COMPANIONS:
            corrected.append(restrict(database.with_name(database.name + suffix), FILE_MODE))
        # created private, before SQLite would create it 0644 (its companions copy its mode)
        os.close(os.open(database, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE))
    done = [item for item in corrected if item]
    for item in done:
        log.warning("made private: %s", item)
    return done
