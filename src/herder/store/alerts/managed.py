"""Channels and rules a job notice is made of (``managed_by`` its id): changed only through
the notice, so that what ``herder job notify`` shows is what sends."""

from __future__ import annotations

from typing import Any

from herder.domain.alerts.notices import NOTICE_PREFIX
from herder.domain.errors import Conflict


def refuse_managed(noun: str, row: Any) -> None:
    """``Conflict`` for a job notice's own rule or channel, saying where to change it."""
    managed_by = row.managed_by
    if managed_by and managed_by.startswith(f"{NOTICE_PREFIX}_"):
        raise Conflict(
            f"{noun} {row.id} is part of job notice {managed_by}: change or remove it with "
            "herder job notify (PUT or DELETE /v1/jobs/{job_id}/notices)"
        )
