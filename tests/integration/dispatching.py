"""One dispatcher pass, for tests that drive the worker protocol by hand."""

from __future__ import annotations

from herder.control.dispatcher import Dispatcher
from herder.store.store import Store


def dispatch(store: Store) -> None:
    Dispatcher(store.placement).step()
