"""The attempts this agent has started, remembered after they end: a claim may hand one over
again after its report was delivered (the server's heartbeat check raced its claim's answer),
and an attempt must run on a worker at most once."""

from __future__ import annotations

from collections import OrderedDict

REMEMBERED = 65_536  # about 6 MiB; minutes of attempts even at hundreds a second


class StartedAttempts:
    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._remembered = remembered
        self._ids: OrderedDict[str, None] = OrderedDict()

    def first_start(self, attempt_id: str) -> bool:
        """True, and remembered, when ``attempt_id`` was not started here before."""
        if attempt_id in self._ids:
            return False
        self._ids[attempt_id] = None
        if len(self._ids) > self._remembered:
            self._ids.popitem(last=False)
        return True
