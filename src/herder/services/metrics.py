"""A scrape's gauges: the state of the queue and the fleet, read from the database at each
scrape, so every API process and replica answers alike."""

from __future__ import annotations

from herder.store.gauges import Gauges, read_gauges
from herder.store.store import Store

__all__ = ["Gauges", "gauges"]  # Gauges: what a scrape's collector turns into families


def gauges(store: Store) -> Gauges:
    return read_gauges(store.database, store.clock.now())
