"""A slice's manifest: what its export wrote, written last. Its presence is the proof that
the slice is whole in the cold tier (and may be dropped from the database); a crash before
it leaves no manifest, and the export is done again over the same keys."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import date

from herder.domain.history import Slice


@dataclass(frozen=True)
class DayFile:
    key: str
    day: date
    tenant_id: str
    runs: int
    attempts: int
    events: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class LogFile:
    """The compacted logs of a tenant's runs of a day (``log_files``)."""

    key: str
    day: date
    tenant_id: str
    attempts: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    slice: str  # the partitions' suffix, p20261123
    first_run_id: str  # the slice's id range: from this one, up to ``end_run_id``
    end_run_id: str
    files: tuple[DayFile, ...]
    logs: tuple[LogFile, ...] = ()

    @property
    def runs(self) -> int:
        return sum(file.runs for file in self.files)

    def without(self, gone: set[str]) -> Manifest:
        return replace(
            self,
            files=tuple(file for file in self.files if file.key not in gone),
            logs=tuple(file for file in self.logs if file.key not in gone),
        )

    def to_json(self) -> bytes:
        document = asdict(self) | {
            "runs": self.runs,
            "tenants": sorted({file.tenant_id for file in self.files}),
            "days": sorted({file.day.isoformat() for file in self.files}),
            "files": [asdict(file) | {"day": file.day.isoformat()} for file in self.files],
            "logs": [asdict(file) | {"day": file.day.isoformat()} for file in self.logs],
        }
        return json.dumps(document, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        document = json.loads(data)
        files = tuple(
            DayFile(**(entry | {"day": date.fromisoformat(entry["day"])}))
            for entry in document["files"]
        )
        logs = tuple(  # none in a manifest written before logs went cold
            LogFile(**(entry | {"day": date.fromisoformat(entry["day"])}))
            for entry in document.get("logs", [])
        )
        return cls(document["slice"], document["first_run_id"], document["end_run_id"], files, logs)


def manifest_key(piece: Slice) -> str:
    return f"runs/{piece.suffix}/manifest.json"


def day_file_key(piece: Slice, day: date, tenant_id: str) -> str:
    return f"runs/{piece.suffix}/{day.isoformat()}/{tenant_id}.jsonl.gz"


def log_file_key(piece: Slice, day: date, tenant_id: str) -> str:
    return f"runs/{piece.suffix}/{day.isoformat()}/{tenant_id}.logs"
