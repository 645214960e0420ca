"""Every write a tenant's own callers make, ordered against its freeze by the tenant's row.

An API process admits a key from its recent-keys cache for 5 s, so a request admitted
before the freeze may write after it; and the edge's mark reaches its cache no sooner.
Neither the cache nor the edge can order that write against the export. The database
does: each write transaction of a request acting for a tenant (``acting_for``, set by the
API's key check for every method but GET and HEAD) first reads the tenant's
``move_state`` under ``FOR KEY SHARE`` of its row (``hold_at_home``, run by
``Database.write`` as the transaction begins); the freeze holds that row ``FOR UPDATE``.
So a write either holds the row first (the freeze waits for it to commit, and the export,
after the freeze, reads it) or reads the freeze (and is refused as the key check would
have: 503 naming the cell). ``KEY SHARE`` conflicts with nothing but ``FOR UPDATE`` (and
a key's change): a tenant's writes never wait for one another on it, nor for the queue
room's ``FOR NO KEY UPDATE``. Taken first in its transaction, before any of the tenant's
other rows, it cannot deadlock with the freeze, which takes the tenant's row first too.
On SQLite writers are serialized: the read alone orders them.

The control loops and the worker protocol act for no tenant: the runs a frozen tenant
queued finish in this cell, and its schedules are stopped by the firer's fence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from sqlalchemy import Connection, select

from herder.domain.moves import refusal
from herder.store.moves.copied import state_of
from herder.store.schema import tenants


@dataclass(frozen=True)
class Acting:
    """A request's writes: for whom, and what they are (how a move refuses them)."""

    tenant_id: str
    method: str
    path: str


# set in the request's own context: its worker threads inherit it, other requests never do
_acting: ContextVar[Acting | None] = ContextVar("herder_acting_tenant", default=None)


def acting_for(tenant_id: str, method: str, path: str) -> None:
    """This request's write transactions are ``tenant_id``'s (``hold_at_home``): set in
    the request's own task, whose context ends with it."""
    _acting.set(Acting(tenant_id, method, path))


@contextmanager
def acting(tenant_id: str, method: str, path: str) -> Iterator[None]:
    """The writes inside are ``tenant_id``'s, and only those: for a caller whose context
    outlives the request (a thread's own, as a test's)."""
    token = _acting.set(Acting(tenant_id, method, path))
    try:
        yield
    finally:
        _acting.reset(token)


P = ParamSpec("P")
T = TypeVar("T")


def unguarded(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function`` run as no tenant's write: what records a request (its audit entry, kept
    in this cell like the rest of its history) rather than what the request writes."""
    context = copy_context()
    context.run(_acting.set, None)
    return context.run(function, *args, **kwargs)


def hold_at_home(connection: Connection) -> None:
    """A write transaction's first statement when it acts for a tenant: the tenant's row
    held ``FOR KEY SHARE`` until the transaction ends, and its move's refusal raised
    (``TenantMoving``) when the tenant is frozen, arriving or moved."""
    acting = _acting.get()
    if acting is None:
        return
    row = connection.execute(
        select(tenants.c.move_state, tenants.c.move_cell)
        .where(tenants.c.id == acting.tenant_id)
        .with_for_update(read=True, key_share=True)
    ).first()
    if row is None or row.move_state is None:
        return
    state = state_of(row.move_state)
    if refused := refusal(acting.tenant_id, state, row.move_cell, acting.method, acting.path):
        raise refused
