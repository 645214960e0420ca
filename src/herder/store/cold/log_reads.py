"""A cold run's log: its run's line names the attempt, the manifest of its slice names the
tenant's log file of its day, checked whole by the sha256 there, then the attempt's blob by
its own. A file the manifest names that is missing or does not match is ``DamagedLog`` (503),
never a run without output."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from herder.domain.history import slice_of
from herder.store.cold.listing import cold_run_record, made_at
from herder.store.cold.log_files import read_attempt_log
from herder.store.cold.reads import read_manifest
from herder.store.cold.tier import ColdTier
from herder.store.log_blobs import DamagedLog, StoredChunk

log = logging.getLogger("herder.store")


@dataclass(frozen=True)
class ColdLog:
    attempts: list[dict[str, Any]]  # the run's attempts as exported (id, number, rank, state)
    attempt_count: int
    run_state: str


def cold_run_of_log(
    cold: ColdTier, tenant_id: str, run_id: str, floor: str, now: datetime
) -> ColdLog | None:
    """The cold run whose log is asked for; None when the cold tier has no such run."""
    record = cold_run_record(cold, tenant_id, run_id, floor, now)
    if record is None:
        return None
    return ColdLog(record["attempts"], record["attempt_count"], record["state"])


def cold_attempt_log(
    cold: ColdTier, tenant_id: str, run_id: str, attempt_id: str, named: str
) -> list[StoredChunk]:
    """The chunks of the attempt (of the tenant's cold run); ``named`` says which, for the
    operator and the caller, when it cannot be read."""
    made = made_at(run_id)
    manifest = read_manifest(cold.blobs, slice_of(made))
    files = [] if manifest is None else manifest.logs
    for file in files:
        if file.tenant_id != tenant_id or file.day != made.date():
            continue
        try:
            data = cold.blobs.get(file.key)
            if data is None:
                raise DamagedLog(f"its cold log file {file.key} is missing")
            if hashlib.sha256(data).hexdigest() != file.sha256:
                raise DamagedLog(f"its cold log file {file.key} does not match its sha256")
            return read_attempt_log(data, attempt_id) or []
        except DamagedLog as error:
            log.error("the cold log of attempt %s is unreadable: %s", attempt_id, error.detail)
            raise DamagedLog(
                f"the stored output of {named} is damaged or missing ({error.detail}); "
                "it was logged for the operator"
            ) from error
    return []
