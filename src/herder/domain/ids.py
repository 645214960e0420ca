"""Sortable, prefixed identifiers (``run_01J…``): time-ordered like ULIDs, so newest-first
listings and cursors follow creation order without a separate column."""

from __future__ import annotations

import secrets

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_id(prefix: str, now_ms: int) -> str:
    """``prefix_`` + 10 chars of milliseconds + 16 random chars (80 bits)."""
    return f"{prefix}_{_base32(now_ms, 10)}{_base32(secrets.randbits(80), 16)}"


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
