"""Transactions that never hold up the tables they touch for long: the online conversion's
(``conversion``) and the migration around it, while servers go on writing.

A statement that waits for a table's lock makes every later statement on that table queue
behind it, however brief its own work: one ``ALTER TABLE`` waiting on a long transaction
stops the world. Each transaction here waits at most ``LOCK_TIMEOUT`` for any lock (row
locks too); one that does not get it is given up, as is a deadlock's loser, and tried
again after a pause, a few times before the error goes up.

A transaction that writes rows beside the servers' (the conversion's copy) waits a tenth of
that, ``ROW_LOCK_TIMEOUT``: a server's transaction waiting on it while it waits on that
transaction is a deadlock, and PostgreSQL's detector, looking after ``deadlock_timeout``
(a second by default), could pick the server's as the one to fail. Giving up sooner, the
copy is always the one that yields.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine, exc, text

log = logging.getLogger("herder.store")
LOCK_TIMEOUT = "1s"
ROW_LOCK_TIMEOUT = "100ms"
TRIES = 10
PAUSE_SECONDS = 0.2  # after the first try given up; one more each time after
_GIVEN_UP = {"55P03", "40P01"}  # lock_not_available (the timeout), deadlock_detected

Result = TypeVar("Result")


def in_brief_transaction(
    engine: Engine, step: Callable[[Connection], Result], lock_timeout: str = LOCK_TIMEOUT
) -> Result:
    """``step`` in a transaction of its own, committed; tried again when a lock was not had
    in time (``step`` must do nothing outside the transaction)."""
    for attempt in range(1, TRIES + 1):
        try:
            with engine.begin() as connection:
                connection.execute(text(f"SET LOCAL lock_timeout = '{lock_timeout}'"))
                return step(connection)
        except exc.OperationalError as error:
            if getattr(error.orig, "sqlstate", None) not in _GIVEN_UP or attempt == TRIES:
                raise
            log.info("a lock not had in %s (try %d of %d): %s", lock_timeout, attempt, TRIES,
                     str(error.orig).splitlines()[0])  # fmt: skip
        time.sleep(PAUSE_SECONDS * attempt)
    raise AssertionError("unreachable: the last try returns or raises")
