"""The shared fleet, for the system tenant's admins: list it, drain a worker and undrain it,
forget a lost one."""

from __future__ import annotations

from herder.domain.models import Worker
from herder.store.store import Store


def list_workers(store: Store) -> list[Worker]:
    return store.workers.fleet()


def drain(store: Store, worker_id: str) -> Worker:
    """Place nothing new on the worker; what it runs finishes."""
    return store.fleet.drain(worker_id)


def undrain(store: Store, worker_id: str) -> Worker:
    return store.fleet.undrain(worker_id)


def forget(store: Store, worker_id: str) -> Worker:
    """No longer list a lost worker (its runs' attempts keep its id)."""
    return store.fleet.forget(worker_id)
