"""How a worker isolates its attempts: chosen per worker, never per job."""

from __future__ import annotations

from enum import StrEnum


class Isolation(StrEnum):
    SANDBOX = "sandbox"  # the default: every attempt in its own sandbox; needs root
    NONE = "none"  # attempts run as the worker's user: only for a fleet whose jobs are trusted
