"""Who a run's events name as having made a change. A person acts through an API key: the
event keeps the key's id (``user:key_…``, stable when the key is renamed or revoked), and the
API adds the key's name and role as it reads the event, for people to read; a worker's
(``worker:wrk_…``) is shown by the worker's name while it is registered."""

from __future__ import annotations

USER = "user:"
WORKER = "worker:"


def user_actor(key_id: str) -> str:
    """The actor of a change made with the key ``key_id``."""
    return f"{USER}{key_id}"


def key_of(actor: str) -> str | None:
    """The key id of a person's actor; None for the system's (``worker:…``, the scheduler)."""
    return actor.removeprefix(USER) if actor.startswith(USER) else None


def key_shown(name: str, role: str) -> str:
    """A key as people know it: ``ci (developer)``."""
    return f"{name} ({role})"


def worker_actor(worker_id: str) -> str:
    """The actor of a change a worker made (or that was made for it: its attempt reaped)."""
    return f"{WORKER}{worker_id}"


def worker_of(actor: str) -> str | None:
    """The worker id of a worker's actor; None for any other."""
    return actor.removeprefix(WORKER) if actor.startswith(WORKER) else None
