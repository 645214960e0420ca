"""Debounce (docs/flow-control.md): a limit that debounces collapses its key's submissions
within the window into one run. The first submission makes the run, ``scheduled`` to start
when the window after it closes; each later one before the start pushes the start to the
window after itself, but never past ``max_wait_seconds`` after the first, and answers with
that same run — whose values are the first submission's or the last's, as the limit keeps.
A burst of edits thus makes one rebuild, after the burst (or, with a maximum wait, at
least that often however long the burst)."""

from __future__ import annotations

from datetime import datetime, timedelta

from herder.domain.limits import Debounce


def starts_at(debounce: Debounce, first_at: datetime, now: datetime) -> datetime:
    """When the key's run starts after a submission at ``now``, the first made at
    ``first_at``."""
    start = now + timedelta(seconds=debounce.window_seconds)
    if debounce.max_wait_seconds is not None:
        start = min(start, first_at + timedelta(seconds=debounce.max_wait_seconds))
    return max(start, now)
