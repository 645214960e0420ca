"""/v1/pools: resource pools (docs/pools.md), made and managed by the system tenant's admins.

A pool is named in the path by its id or its name. Any key reads the pools its tenant may
use (those with a share for it), with only its own share shown; another pool answers 404.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from herder.api.auth import Caller, StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.api.queries import Paging
from herder.api.schemas import PoolCreate
from herder.app import pools
from herder.domain.autoscaling import PoolAutoscaling
from herder.domain.models import Page
from herder.domain.pools import Pool, PoolChanges

router = APIRouter(tags=["pools"])


@router.post("/v1/pools", status_code=status.HTTP_201_CREATED, responses=problems(409))
def create_pool(body: PoolCreate, _admin: SystemAdmin, store: StoreDep, response: Response) -> Pool:
    """A pool: its workers by ``selector`` (default ``{"pool": NAME}``, what ``herder worker
    --pool NAME`` registers with) and the tenants that may use it, each with its nominal
    share. A name already taken is 409; a share naming an unknown tenant 422."""
    pool = store.pools.create(body.name, body.spec())
    response.headers["Location"] = f"/v1/pools/{pool.id}"
    return pool


@router.get("/v1/pools")
def list_pools(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    usable: Annotated[
        bool,
        Query(description="only the pools the caller's own tenant may use (for system admins)"),
    ] = False,
) -> Page[Pool]:
    """Newest first: every pool for a system admin; else the pools the caller's tenant may
    use, each with only that tenant's share."""
    return pools.list_pools(store, caller, usable=usable, page=page)


@router.get("/v1/pools/{pool_id}")
def get_pool(pool_id: str, caller: Caller, store: StoreDep) -> Pool:
    """By id or name."""
    return pools.read_pool(store, caller, pool_id)


@router.patch("/v1/pools/{pool_id}")
def update_pool(pool_id: str, body: PoolChanges, _admin: SystemAdmin, store: StoreDep) -> Pool:
    """Each field given replaces the stored one (``shares`` as a whole; ``"selector": null``:
    the default). Running work is not stopped; the dispatcher's next pass uses the change."""
    return store.pools.update(pool_id, body)


@router.get("/v1/pools/{pool_id}/autoscaling")
def get_autoscaling(pool_id: str, _admin: SystemAdmin, store: StoreDep) -> PoolAutoscaling:
    """How many workers the pool should have now (docs/autoscaling.md): enough for what runs
    and waits in it and for its schedules' forecast peak within the policy's lead time, within
    its bounds; with its workers and how busy each is. 404 for a pool without autoscaling."""
    return pools.read_autoscaling(store, pool_id)


@router.delete("/v1/pools/{pool_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_pool(pool_id: str, _admin: SystemAdmin, store: StoreDep) -> Response:
    """The pool and its shares. Runs that name it are not lost: queued ones wait, with a
    reason, until a pool of that name exists again; jobs keep naming it."""
    store.pools.delete(pool_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
