"""What the Python client raises: one clear line a user can act on."""

from __future__ import annotations

import httpx


class ClientError(Exception):
    """Something the user can act on: the message is one clear line."""


class ServerUnreachable(ClientError):
    pass


class ApiError(ClientError):
    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        retry_after: float | None = None,
        field: str | None = None,
    ) -> None:
        named = detail if field is None or detail.startswith(field) else f"{field}: {detail}"
        super().__init__(f"{named} (HTTP {status})")
        self.status = status
        self.title = title
        self.detail = detail
        self.retry_after = retry_after  # seconds, from Retry-After (429, 503)
        self.field = field  # the request's field a 422 names, as a dotted path

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        """An error response: its problem document's title, detail and field (or the start
        of whatever else it held) and Retry-After."""
        retry_after = _seconds(response.headers.get("retry-after"))
        field = None
        try:
            problem = response.json()
            title, detail = problem.get("title", ""), problem["detail"]
            field = problem.get("field") if isinstance(problem.get("field"), str) else None
        except (ValueError, KeyError, TypeError, AttributeError):
            title, detail = "", response.text[:500]
        return cls(response.status_code, title, detail, retry_after=retry_after, field=field)


def _seconds(header: str | None) -> float | None:
    """Retry-After in seconds (its HTTP-date form is not used by Herder)."""
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None
