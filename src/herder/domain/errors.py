"""Errors a caller can act on.

    HerderError
    ├── NotFound        the object does not exist, or belongs to another tenant
    ├── Conflict        a stale or illegal transition, a duplicate name
    ├── Gone            a worker declared lost: it must drop its attempts and register again
    ├── Invalid         input that breaks a rule (field named in ``field``)
    ├── TooLarge        a body or upload over its limit
    ├── Unauthorized    no key, or a key we do not know
    ├── Forbidden       a known key whose role does not allow the call
    ├── RateLimited     a tenant submits faster than its quota (says when to retry)
    └── Unavailable     a dependency (the store) cannot be reached right now

The API maps each to one HTTP problem type in ``herder.api.errors``.
"""

from __future__ import annotations

import math


class HerderError(Exception):
    """Root of every error Herder raises on purpose."""

    status = 500
    title = "Internal error"

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class NotFound(HerderError):
    status = 404
    title = "Not found"


class Conflict(HerderError):
    status = 409
    title = "Conflict"


class Gone(HerderError):
    status = 410
    title = "Gone"


class Invalid(HerderError):
    status = 422
    title = "Invalid request"


class TooLarge(HerderError):
    status = 413
    title = "Request too large"


class Unauthorized(HerderError):
    status = 401
    title = "Unauthorized"


class Forbidden(HerderError):
    status = 403
    title = "Forbidden"


class RateLimited(HerderError):
    status = 429
    title = "Too many requests"

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
    status = 503
    title = "Service unavailable"
