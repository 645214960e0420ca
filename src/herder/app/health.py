"""Whether this process can reach its store (readiness)."""

from __future__ import annotations

from herder.store.store import Store


def ready(store: Store) -> str:
    """The database's dialect, once it has answered; its error when it cannot."""
    store.database.ping()
    return store.database.dialect
