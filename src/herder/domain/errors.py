"""Errors a caller can act on.

    HerderError
    ├── NotFound        the object does not exist, or belongs to another tenant
    ├── Conflict        a stale or illegal transition, a duplicate name
    ├── StaleVersion    the object changed since the caller read the version it names
    ├── Gone            a worker declared lost: it must drop its attempts and register again
    ├── Invalid         input that breaks a rule (the fields at fault named in ``errors``)
    ├── TooLarge        a body or upload over its limit
    ├── Unauthorized    no key, or a key we do not know
    ├── Forbidden       a known key whose role does not allow the call
    ├── RateLimited     a tenant submits faster than its quota (says when to retry)
    └── Unavailable     a dependency (the store) cannot be reached right now
        └── TemporarilyUnavailable    for a moment: the store lost, a lock waited out
            └── TenantMoving          the tenant is moving to another cell, or moved

They say what went wrong, not how a protocol answers it: the API maps each class to its
HTTP status and title in one place, ``herder.api.errors``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


class HerderError(Exception):
    """Root of every error Herder raises on purpose."""

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class NotFound(HerderError):
    pass


class Conflict(HerderError):
    pass


class StaleVersion(HerderError):
    """A change made on the condition that the object is still at a version it no longer is."""

    def __init__(self, detail: str, *, current_version: int) -> None:
        super().__init__(detail)
        self.current_version = current_version


class Gone(HerderError):
    pass


@dataclass(frozen=True)
class FieldError:
    field: str  # dotted path, e.g. ``resources.cpu``; ``body`` for the object as a whole
    message: str


class Invalid(HerderError):
    def __init__(
        self, detail: str, *, field: str | None = None, errors: list[FieldError] | None = None
    ) -> None:
        super().__init__(detail, field=field)
        if errors is None and field is not None:
            errors = [FieldError(field, detail)]
        self.errors = errors or []

    @classmethod
    def from_validation(cls, error: ValidationError) -> Invalid:
        """Input a model refused (a PATCH merged onto stored values, say), every field named."""
        return cls.from_errors(error.errors(include_url=False))

    @classmethod
    def from_errors(cls, items: Sequence[Mapping[str, Any]]) -> Invalid:
        """From pydantic's error items (``loc``, ``msg``), as request validation gives them."""
        errors = [
            FieldError(_field_path(tuple(item["loc"])), item["msg"].removeprefix("Value error, "))
            for item in items
        ]
        return cls("; ".join(f"{item.field}: {item.message}" for item in errors), errors=errors)


def _field_path(location: tuple[int | str, ...]) -> str:
    """A validation error's location as a dotted path, without where it came in (body, query)."""
    parts = [str(part) for part in location if part not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(location[-1] if location else "body")


class TooLarge(HerderError):
    pass


class Unauthorized(HerderError):
    pass


class Forbidden(HerderError):
    pass


class RateLimited(HerderError):
    def __init__(self, detail: str, *, retry_after_seconds: float, rate: float, burst: float):
        super().__init__(detail)
        self.retry_after_seconds = retry_after_seconds
        self.rate = rate
        self.burst = burst

    @property
    def retry_after_header(self) -> int:
        """Whole seconds, rounded up, at least 1 (the header takes no fractions)."""
        return max(1, math.ceil(self.retry_after_seconds))


class Unavailable(HerderError):
    """This server cannot serve the call (say, a key it is not configured with)."""


class TemporarilyUnavailable(Unavailable):
    """Unavailable for a moment: the database lost (a failover, a restart), a lock waited out,
    a deadlock. The call changed nothing, or it committed and its answer was lost; answered
    with Retry-After, so a client tries again (an idempotent call, or a keyed submission)."""


class TenantMoving(TemporarilyUnavailable):
    """The caller's tenant is moving to another cell (its writes wait for the move) or has
    moved there (an edge whose cache is stale sends the client back): says the cell, and
    when to try again."""

    def __init__(self, detail: str, *, cell: str, retry_after_seconds: int) -> None:
        super().__init__(detail)
        self.cell = cell
        self.retry_after_seconds = retry_after_seconds
