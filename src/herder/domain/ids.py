"""Sortable, prefixed identifiers (``run_01J…``): time-ordered like ULIDs, so newest-first
listings and cursors follow creation order without a separate column."""

from __future__ import annotations

import os
import threading

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


_RANDOM_BYTES = 10  # 80 bits an id
_DRAWN_AT_ONCE = 4096  # bytes read from the OS at a time: 409 ids


class _Randomness(threading.local):
    """The operating system's random bytes, read many ids' worth at a time. One
    ``os.urandom`` an id releases the GIL each time: with other threads busy (a firer's
    10,000 runs beside the dispatcher), each id waited for the GIL again and 10,000 ids took
    0.8 s instead of 0.09. The bytes are the same CSPRNG output; each thread has its own, and
    a forked child (the API's pre-forked processes) never reuses its parent's."""

    def __init__(self) -> None:
        self.pid = -1
        self.pool = b""
        self.offset = 0

    def take(self) -> int:
        if self.pid != os.getpid() or self.offset + _RANDOM_BYTES > len(self.pool):
            self.pid, self.pool, self.offset = os.getpid(), os.urandom(_DRAWN_AT_ONCE), 0
        start, self.offset = self.offset, self.offset + _RANDOM_BYTES
        return int.from_bytes(self.pool[start : self.offset], "big")


_randomness = _Randomness()


def new_id(prefix: str, now_ms: int) -> str:
    """``prefix_`` + 10 chars of milliseconds + 16 random chars (80 bits)."""
    return f"{prefix}_{_base32(now_ms, 10)}{_base32(_randomness.take(), 16)}"


def id_bound(prefix: str, moment_ms: int) -> str:
    """The smallest id ``new_id(prefix, …)`` can make at ``moment_ms`` or later: ids made
    before it sort below, ids made at or after it sort at or above."""
    return f"{prefix}_{_base32(moment_ms, 10)}"


def id_time_ms(identifier: str) -> int:
    """The milliseconds an id was made at (the inverse of its time part)."""
    value = 0
    for char in identifier.partition("_")[2][:10]:
        value = value * 32 + _ALPHABET.index(char)
    return value
