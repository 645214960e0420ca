"""Which member should run a control loop: rendezvous (highest-random-weight) hashing.

Every process computes the same answer from the same set of members, with no coordination;
when a member joins or leaves, only the loops it wins or held change hands (about 1/N of
them), so the loops spread evenly and a rebalance moves as little as possible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _weight(member: str, loop: str) -> bytes:
    return hashlib.blake2b(f"{member}\0{loop}".encode(), digest_size=8).digest()


def preferred_member(loop: str, members: Iterable[str]) -> str:
    """The member with the highest weight for ``loop`` (ties, never seen in practice, go to
    the greater name so every process agrees)."""
    return max(members, key=lambda member: (_weight(member, loop), member))
