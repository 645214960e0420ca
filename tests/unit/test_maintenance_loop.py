"""The maintenance loop's pass: expired audit entries and old limit starts on both stores;
on PostgreSQL make slices, detach, export to the cold tier, drop, prune the cold tier, and
come back in ten minutes; on SQLite delete a batch, and come back at once while batches come
full."""

from __future__ import annotations

from typing import cast

import pytest

from herder.control.maintenance import (
    BETWEEN_BATCHES_SECONDS,
    PASS_INTERVAL_SECONDS,
    Maintenance,
)
from herder.store.history.retention import DELETE_BATCH, HistoryRetention
from herder.store.limit_use import PRUNE_BATCH


class RecordingHistory:
    def __init__(self, deleted: int = 0, audit_deleted: int = 0, starts_deleted: int = 0) -> None:
        self.calls: list[str] = []
        self.deleted = deleted
        self.audit_deleted = audit_deleted
        self.starts_deleted = starts_deleted

    def prepare_slices(self) -> list[str]:
        self.calls.append("prepare")
        return []

    def detach_expired(self) -> list[str]:
        self.calls.append("detach")
        return []

    def export_detached(self) -> list[str]:
        self.calls.append("export")
        return []

    def drop_detached(self) -> list[str]:
        self.calls.append("drop")
        return []

    def remove_expired_cold(self) -> list[str]:
        self.calls.append("remove cold")
        return []

    def delete_expired_batch(self) -> int:
        self.calls.append("delete")
        return self.deleted

    def delete_expired_audit(self) -> int:
        self.calls.append("audit")
        return self.audit_deleted

    def delete_old_limit_starts(self) -> int:
        self.calls.append("limit starts")
        return self.starts_deleted


def test_a_postgresql_pass_makes_slices_then_detaches_exports_and_drops() -> None:
    history = RecordingHistory()
    loop = Maintenance(cast(HistoryRetention, history), partitioned=True)
    assert loop.step() == PASS_INTERVAL_SECONDS
    assert history.calls == [
        "audit",
        "limit starts",
        "prepare",
        "detach",
        "export",
        "drop",
        "remove cold",
    ]


@pytest.mark.parametrize(
    ("deleted", "wake"),
    [(DELETE_BATCH, BETWEEN_BATCHES_SECONDS), (DELETE_BATCH - 1, PASS_INTERVAL_SECONDS),
     (0, PASS_INTERVAL_SECONDS)],
)  # fmt: skip
def test_a_sqlite_pass_deletes_a_batch_and_comes_back_soon_while_more_wait(
    deleted: int, wake: float
) -> None:
    history = RecordingHistory(deleted)
    loop = Maintenance(cast(HistoryRetention, history), partitioned=False)
    assert loop.step() == wake
    assert history.calls == ["audit", "limit starts", "delete"]


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_full_batch_of_expired_audit_entries_brings_the_next_pass_soon(
    partitioned: bool,
) -> None:
    history = RecordingHistory(audit_deleted=DELETE_BATCH)
    loop = Maintenance(cast(HistoryRetention, history), partitioned=partitioned)
    assert loop.step() == BETWEEN_BATCHES_SECONDS


def test_a_full_batch_of_old_limit_starts_brings_the_next_pass_soon() -> None:
    history = RecordingHistory(starts_deleted=PRUNE_BATCH)
    loop = Maintenance(cast(HistoryRetention, history), partitioned=True)
    assert loop.step() == BETWEEN_BATCHES_SECONDS
