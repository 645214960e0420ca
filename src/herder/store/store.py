"""The store: one database, the repositories over it."""

from __future__ import annotations

from herder.clock import Clock, SystemClock
from herder.store.access import AccessRepository
from herder.store.artifacts import ArtifactRepository
from herder.store.database import Database
from herder.store.jobs import JobRepository
from herder.store.logs import LogRepository
from herder.store.reports import ReportRepository
from herder.store.runs import RunRepository
from herder.store.workers import WorkerRepository


class Store:
    def __init__(self, url: str, *, clock: Clock | None = None, pool_size: int = 10) -> None:
        self.clock = clock or SystemClock()
        self.database = Database(url, pool_size=pool_size)
        self.access = AccessRepository(self.database, self.clock)
        self.artifacts = ArtifactRepository(self.database, self.clock)
        self.jobs = JobRepository(self.database, self.clock)
        self.runs = RunRepository(self.database, self.clock, self.jobs)
        self.workers = WorkerRepository(self.database, self.clock)
        self.logs = LogRepository(self.database, self.clock)
        self.reports = ReportRepository(self.database, self.clock)

    def migrate(self) -> None:
        self.database.migrate()

    def close(self) -> None:
        self.database.dispose()
