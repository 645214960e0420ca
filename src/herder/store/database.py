"""The connection to the store: engine setup per dialect, transactions, migrations.

SQLite runs in WAL mode and takes its write lock at ``BEGIN IMMEDIATE`` so that two writers
queue on ``busy_timeout`` instead of failing half-way through a transaction.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from urllib.parse import parse_qsl, urlencode

from sqlalchemy import (
    Connection,
    Engine,
    Executable,
    Insert,
    Text,
    bindparam,
    create_engine,
    event,
    exc,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import make_url

from herder.domain.errors import Conflict, TemporarilyUnavailable, Unavailable
from herder.store.statements import count_statements

log = logging.getLogger("herder.store")
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
_NOTICES = "herder_notices"  # connection.info key: notices to deliver after commit
# Not a channel: what a listener delivers when it (re)starts listening. What was committed
# while it did not went unheard, so a waiter that relies on notices should look now.
LISTENING = "herder_listening"
_DEFERRED = "herder_deferred"  # connection.info key: writes made once, at the transaction's end
_MARKS = "herder_deferred_marks"  # connection.info key: how much was deferred at each savepoint
_BACKEND = "herder_backend_pid"  # a pooled connection's info key: its backend's pid


# libpq's multi-host form, as pg_auto_failover and Patroni print it: postgresql://a:5432,b:5432/db
_HOST_LIST = re.compile(
    r"^(?P<scheme>postgres(?:ql)?(?:\+psycopg)?://)(?P<credentials>[^@/?]*@)?"
    r"(?P<hosts>[^/?@]*,[^/?@]*)(?P<rest>[/?].*)?$"
)


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and use psycopg 3 for them. A URL naming several
    hosts the libpq way (``postgresql://a:5432,b:5432/herder?target_session_attrs=read-write``)
    becomes SQLAlchemy's form of it (a ``host`` parameter each): libpq tries them in turn and
    keeps the one that answers as the URL asks, the primary after a failover."""
    listed = _HOST_LIST.match(url)
    if listed is not None:
        path, _, query = (listed["rest"] or "/").partition("?")
        hosts = [("host", host.strip()) for host in listed["hosts"].split(",")]
        parameters = urlencode([*hosts, *parse_qsl(query, keep_blank_values=True)])
        url = f"{listed['scheme']}{listed['credentials'] or ''}{path or '/'}?{parameters}"
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get("herder_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def _wrapped(error: exc.SQLAlchemyError) -> Conflict | Unavailable:
    """The domain's word for a driver error no repository turned into one of its own: a
    unique key taken meanwhile is a conflict; the connection lost, a lock waited out, a
    deadlock or a serialization failure make the store unavailable for a moment, and
    anything else for this call — our bug, logged here with its traceback."""
    if isinstance(error, exc.IntegrityError) and _is_unique_violation(error):
        return Conflict("the change conflicts with one stored meanwhile; read and try again")
    if isinstance(error, exc.OperationalError | exc.InterfaceError):
        return TemporarilyUnavailable(f"the database is unavailable: {error.orig}")
    log.error("the store failed a call", exc_info=error)
    return Unavailable("the store failed this call; the error was logged")


def _is_unique_violation(error: exc.IntegrityError) -> bool:
    sqlstate = getattr(error.orig, "sqlstate", None)  # psycopg
    return sqlstate == "23505" or "UNIQUE constraint failed" in str(error.orig)


_NOTIFY = text(
    "SELECT pg_notify(channel, payload) "
    "FROM unnest(CAST(:channels AS TEXT[]), CAST(:payloads AS TEXT[])) AS n(channel, payload)"
)


# What writes a transaction's deferred items: the statement and its parameters (on
# PostgreSQL an insert, which can carry the transaction's notices with it).
Flush = Callable[[Connection, list[Any]], tuple[Executable, Any]]


def deferred(connection: Connection, key: str, flush: Flush) -> list[Any] | None:
    """What this transaction defers under ``key``: a list to add to, which ``flush`` writes
    once, just before the transaction commits (one statement however many calls added to
    it: a chain task's end, its successor's creation and its start are one insert of events).
    None outside ``Database.write``: write at once then. A savepoint rolled back takes back
    what was added under it."""
    pending: dict[str, tuple[Flush, list[Any]]] | None = connection.info.get(_DEFERRED)
    if pending is None:
        return None
    if key not in pending:
        pending[key] = (flush, [])
    return pending[key][1]


def _finish(connection: Connection, *, notify: bool) -> None:
    """The transaction's deferred writes, then its notices (``notify``: PostgreSQL's
    NOTIFY), the last write and the notices in one statement where there are both."""
    pending: dict[str, tuple[Flush, list[Any]]] = connection.info.get(_DEFERRED) or {}
    writes = [flush(connection, items) for flush, items in pending.values() if items]
    notices = list(connection.info.get(_NOTICES, {})) if notify else []
    carrier = writes.pop() if notices and writes and isinstance(writes[-1][0], Insert) else None
    for statement, parameters in writes:
        connection.execute(statement, parameters)
    if carrier is not None:
        statement, parameters = carrier
        assert isinstance(statement, Insert)
        channels, payloads = zip(*notices, strict=True)
        together = _NOTIFY_AFTER.add_cte(statement.cte("written"))
        connection.execute(
            together, {**parameters, "channels": list(channels), "payloads": list(payloads)}
        )
    elif notices:
        _send_notices(connection, notices)


_NOTICED = (
    func.unnest(bindparam("channels", type_=ARRAY(Text)), bindparam("payloads", type_=ARRAY(Text)))
    .table_valued("channel", "payload")
    .render_derived(name="n")
)
_NOTIFY_AFTER = select(func.pg_notify(_NOTICED.c.channel, _NOTICED.c.payload)).select_from(
    _NOTICED
)  # with a write as its CTE: the write and the notices in one round trip


def _send_notices(connection: Connection, notices: list[tuple[str, str]]) -> None:
    """All of a transaction's notices in one statement, as its last. One statement text
    whatever their number: a new text per count cost the client ~60 ms to parse for the
    dispatcher's first pass (490 notices)."""
    channels, payloads = zip(*notices, strict=True)
    connection.execute(_NOTIFY, {"channels": list(channels), "payloads": list(payloads)})


def _savepoints_take_back_deferred(engine: Engine) -> None:
    """A savepoint rolled back takes back what was deferred under it (``deferred``)."""

    @event.listens_for(engine, "savepoint")
    def _marked(connection: Connection, _name: str) -> None:
        pending: dict[str, tuple[Flush, list[Any]]] = connection.info.get(_DEFERRED) or {}
        marks = {key: len(items) for key, (_, items) in pending.items()}
        connection.info.setdefault(_MARKS, []).append(marks)

    @event.listens_for(engine, "rollback_savepoint")
    def _taken_back(connection: Connection, _name: str, _context: Any) -> None:
        marks: dict[str, int] = (connection.info.get(_MARKS) or [{}]).pop()
        pending: dict[str, tuple[Flush, list[Any]]] = connection.info.get(_DEFERRED) or {}
        for key, (_, items) in pending.items():
            del items[marks.get(key, 0) :]

    @event.listens_for(engine, "release_savepoint")
    def _kept(connection: Connection, _name: str, _context: Any) -> None:
        if marks := connection.info.get(_MARKS):
            marks.pop()


class Database:
    """An engine plus the two kinds of transaction the repositories use."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self._subscribers: list[Callable[[str, str], None]] = []
        self._write_guards: list[Callable[[Connection], None]] = []
        self._own_backends: set[int | None] = set()
        self._writer_lock: AbstractContextManager[object] = (
            threading.Lock() if self.dialect == "sqlite" else nullcontext()
        )
        if self.dialect == "sqlite":
            self.engine = create_engine(
                self.url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
                pool_size=pool_size,
                max_overflow=pool_size * 2,
            )
            _configure_sqlite(self.engine)
        elif self.dialect == "postgresql":
            # No pre-ping (a round trip per transaction): a dropped connection fails its
            # transaction once, is invalidated, and the next checkout opens a fresh one.
            # Sessions in UTC: psycopg then hands back timestamps in datetime.UTC itself, which
            # the store's UtcDateTime passes through (another zone costs a conversion a value).
            options = {} if "options" in parsed.query else {"options": "-c TimeZone=UTC"}
            self.engine = create_engine(
                self.url, pool_size=pool_size, max_overflow=pool_size * 2, connect_args=options
            )
            self._remember_backends()
        else:
            raise ValueError(
                f"unsupported database {parsed.drivername!r}; use sqlite or postgresql"
            )
        count_statements(self.engine)
        _savepoints_take_back_deferred(self.engine)

    def _remember_backends(self) -> None:
        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection: Any, record: Any) -> None:
            record.info[_BACKEND] = dbapi_connection.info.backend_pid  # libpq knows it
            self._own_backends.add(record.info[_BACKEND])

        @event.listens_for(self.engine, "close")
        def _on_close(_dbapi_connection: Any, record: Any) -> None:
            self._own_backends.discard(record.info.get(_BACKEND))

    def driver_options(self) -> dict[str, str]:
        """The URL as the driver's connection options (every host and port, ``sslmode``,
        ``target_session_attrs``, …), for a connection of our own beside the engine's."""
        _, options = self.engine.dialect.create_connect_args(self.engine.url)
        return {name: str(value) for name, value in options.items() if name != "context"}

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One read-write transaction, committed on success, rolled back on any error.

        On SQLite, writers of this process queue on a mutex first: SQLite's own busy handler
        sleeps with back-off, which under contention costs milliseconds per transaction.
        """
        with self._writer_lock, self._connect(write=True) as connection:
            try:
                with connection.begin():
                    connection.info[_DEFERRED] = {}
                    for guard in self._write_guards:
                        guard(connection)
                    yield connection
                    _finish(connection, notify=self.is_postgres)
                    notices: dict[tuple[str, str], None] = connection.info.get(_NOTICES, {})
            finally:
                connection.info.pop(_NOTICES, None)
                connection.info.pop(_DEFERRED, None)
                connection.info.pop(_MARKS, None)
        for channel, payload in notices:
            self.deliver(channel, payload)

    def notify(self, connection: Connection, channel: str, payload: str = "") -> None:
        """Tell every subscriber once this transaction commits: this process's right after
        the commit, other processes' (PostgreSQL) by a NOTIFY that their ``Listener`` hears.
        The same notice given twice in a transaction is sent once."""
        connection.info.setdefault(_NOTICES, {})[(channel, payload)] = None

    def withdraw(self, connection: Connection, channel: str, payload: str = "") -> None:
        """Send no more a notice given earlier in this transaction (its news is given
        otherwise)."""
        connection.info.get(_NOTICES, {}).pop((channel, payload), None)

    def is_own_backend(self, pid: int) -> bool:
        """Whether a PostgreSQL backend is one of this process's connections: its notices
        were delivered here already when it committed."""
        return pid in self._own_backends

    def guard_writes(self, guard: Callable[[Connection], None]) -> None:
        """Run ``guard`` first in every write transaction (it may refuse it by raising):
        a tenant's writes ordered against its move (``moves/guard.py``)."""
        self._write_guards.append(guard)

    def subscribe(self, subscriber: Callable[[str, str], None]) -> None:
        self._subscribers.append(subscriber)

    def deliver(self, channel: str, payload: str) -> None:
        for subscriber in self._subscribers:
            subscriber(channel, payload)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """Reads. On PostgreSQL each statement is its own transaction: under read committed a
        transaction gives several reads no common snapshot anyway, and its BEGIN and COMMIT
        were two round trips more a read. SQLite's BEGIN keeps a read's statements on one
        snapshot of the file."""
        with self._connect(write=False) as connection:
            if self.is_postgres:
                connection.execution_options(isolation_level="AUTOCOMMIT")
            with connection.begin():
                yield connection

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[Connection]:
        """A connection whose driver errors leave as domain errors (see ``_wrapped``)."""
        try:
            connection = self.engine.connect()
        except exc.SQLAlchemyError as error:  # the server, or a free pooled connection
            raise TemporarilyUnavailable(f"cannot reach the database: {error}") from error
        try:
            yield connection.execution_options(herder_write=write)
        except exc.SQLAlchemyError as error:
            raise _wrapped(error) from error
        finally:
            connection.close()

    def ping(self) -> None:
        """A round trip to the database (``Unavailable`` when it cannot answer)."""
        with self.read() as connection:
            connection.execute(text("SELECT 1"))

    def migrate(self) -> None:
        """Bring the schema to the newest revision (idempotent; safe on every start)."""
        from herder.store.migrations import upgrade_to_head

        upgrade_to_head(self)

    def dispose(self) -> None:
        self.engine.dispose()
