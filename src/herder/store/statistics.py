"""The planner's row counts for tables that grew fast (PostgreSQL).

A history slice starts empty and, at a run rate in the hundreds a second, holds thousands of
rows long before autovacuum's next look (a minute apart by default): until then the planner
takes it for a ten-row table and plans a worker's claim as a scan of every run in the slice
(50 ms a claim at 12,000 runs in the one-off bench, and the control plane a third dearer).
So a table whose rows changed more than it held at its last ``ANALYZE`` is analysed again: its
counts are never off by more than twice, whether autovacuum runs or not (it is off on some
servers), and a large table is analysed only once it has doubled."""

from __future__ import annotations

from sqlalchemy import text

from herder.store.database import Database

FLOOR_ROWS = 1_000  # below this many changes no plan goes wrong enough to matter
AT_MOST = 8  # tables a pass
LOCK_TIMEOUT = "'200ms'"  # a slice being detached or made holds its lock: next pass

_STALE = text(
    "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid"
    " WHERE s.schemaname = current_schema() AND c.relkind = 'r'"
    " AND s.n_mod_since_analyze > greatest(:floor, c.reltuples)"
    " ORDER BY s.n_mod_since_analyze DESC LIMIT :at_most"
)


class TableStatistics:
    def __init__(self, database: Database) -> None:
        self._database = database

    def refresh_stale(self) -> list[str]:
        """Analyse the tables whose row counts may be off by more than twice; their names."""
        with self._database.read() as connection:
            stale = connection.execute(_STALE, {"floor": FLOOR_ROWS, "at_most": AT_MOST})
            names = list(stale.scalars())
        analysed = []
        for name in names:
            with self._database.write() as connection:
                quoted = connection.dialect.identifier_preparer.quote(name)
                connection.execute(text(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT}"))
                connection.execute(text(f"ANALYZE {quoted}"))
            analysed.append(name)
        return analysed
