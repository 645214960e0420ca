"""Counting what a process sends the database, by kind: each statement a round trip (an
``executemany`` counts once), and each commit and rollback. The hot path's cost is the number
of statements a run takes (issue 44); ``herder_database_statements_total`` shows it live, and
the one-off bench divides it by the runs."""

from __future__ import annotations

import functools
from typing import Any

from prometheus_client import Counter
from sqlalchemy import Engine, event

from herder.telemetry.metrics import DATABASE_STATEMENTS

KINDS = ("select", "insert", "update", "delete")


def count_statements(engine: Engine) -> None:
    event.listen(engine, "before_cursor_execute", _statement)
    event.listen(engine, "commit", lambda _connection: _counter("commit").inc())
    event.listen(engine, "rollback", lambda _connection: _counter("rollback").inc())


def kind_of(statement: str) -> str:
    """The statement's first word when it is one of ``KINDS``, else ``other`` (a ``WITH``
    among them: a CTE may write as well as read)."""
    word = statement.lstrip(" (\n\t").split(None, 1)[0].lower() if statement.strip() else ""
    return word if word in KINDS else "other"


def _statement(*arguments: Any) -> None:
    _counter(kind_of(arguments[2])).inc()


@functools.cache
def _counter(kind: str) -> Counter:
    return DATABASE_STATEMENTS.labels(kind)
