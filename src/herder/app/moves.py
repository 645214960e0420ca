"""A cell's use cases in a tenant's move (docs/cells.md, "Moving a tenant"): its state
shifted, and a document imported — each read, decided (``domain.moves``), applied in one unit
of work. The plain reads and writes (the export, programs' bytes, an import taken back) are
the store's (``Store.moves``)."""

from __future__ import annotations

from collections.abc import Sequence

from herder.app.work import unit_of_work
from herder.domain.errors import Conflict
from herder.domain.moves import (
    MoveState,
    TenantExport,
    arrival,
    import_refusal,
    pools_lacking,
    shift_refusal,
)
from herder.store.moves import imports, states
from herder.store.moves.states import MoveStatus
from herder.store.store import Store


def shift(
    store: Store,
    tenant_id: str,
    wanted: MoveState | None,
    cell: str | None,
    target_pools: Sequence[str] | None = None,
) -> MoveStatus:
    """The tenant's state moved to ``wanted`` (towards or from ``cell``) under its row's
    lock, or ``Conflict`` with nothing changed (``domain.moves.shift_refusal``). A freeze
    stops its schedules (the firer's fence); at home again (its move taken back) or here
    now (arrived), they are due again."""
    with unit_of_work(store) as work:
        facts = states.held(work.connection, tenant_id)
        if refused := shift_refusal(facts, wanted, cell, target_pools):
            raise refused
        states.set_state(work.connection, tenant_id, wanted, cell)
        if wanted is MoveState.FROZEN and facts.state is None:
            states.stop_schedules(work.connection, tenant_id, work.now)
        if wanted is None:
            states.due_again(work.connection, tenant_id)
    store.moves.forget_tenant(tenant_id)
    return MoveStatus(tenant_id, wanted, None if wanted is None else cell)


def import_tenant(store: Store, document: TenantExport) -> MoveStatus:
    """The tenant as the document says, arriving (or returning to a cell it left, which
    keeps its history: ``domain.moves.arrival``), in one unit of work: ``Conflict`` for a
    tenant that lives here or is another move's import (this move's partial import is
    replaced: importing twice makes one tenant), an id or name another tenant holds, a pool
    or a program's bytes this cell lacks; ``Invalid`` for rows that are not the tenant's."""
    tenant_id = document.tenant_id
    rows = imports.checked(document)
    keyring = store.moves.keys() if imports.has_sealed(rows) else None
    if unsent := store.moves.unsent(tenant_id, document.artifacts):
        raise Conflict(f"artifact {unsent[0][:64]}'s bytes were not sent before the import")
    with unit_of_work(store) as work:
        here = imports.here(work.connection, tenant_id)
        if refused := import_refusal(tenant_id, here, document.from_cell):
            raise refused
        becomes = arrival(here)
        if here is not None and here[0] is MoveState.ARRIVING:
            imports.remove(work.connection, tenant_id)  # this move's import, made again
        pool_ids = imports.pool_ids(work.connection)
        if lacking := pools_lacking((row["pool"] for row in rows["pool_shares"]), pool_ids):
            raise Conflict(f"this cell lacks the pools {', '.join(lacking)}", field="pools")
        imports.write_tenant(work.connection, document, rows, pool_ids, keyring, becomes)
    store.moves.forget_tenant(tenant_id)
    return MoveStatus(tenant_id, becomes, document.from_cell)
