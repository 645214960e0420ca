"""A scrape's gauges: the state of the queue and the fleet, read from the database at each
scrape, so every API process and replica answers alike."""

from __future__ import annotations

from herder.store.gauges import Gauges, read_gauges
from herder.store.limit_gauges import TOP_KEYS, LimitGauges
from herder.store.store import Store

# what a scrape's collector turns into families
__all__ = ["TOP_KEYS", "Gauges", "LimitGauges", "gauges"]


def gauges(store: Store) -> Gauges:
    return read_gauges(store.database, store.clock.now())
