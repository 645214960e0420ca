"""Waiting on a condition, not for a time: what a test waits for may take a moment (a killed
process to finish dying, a worker's thread to catch up)."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_SECONDS = 0.01


def eventually(check: Callable[[], bool], within: float = 1.0) -> bool:
    """Whether ``check`` comes true within ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True
