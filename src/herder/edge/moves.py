"""A tenant moved from its cell to another, step by step, by the edge
(``POST /v1/cells/{to}/tenants/{tenant_id}/move``; docs/cells.md, "Moving a tenant"):

    who       the bearer key an admin's of the source cell's system tenant, the
              ``X-Herder-Target-Key`` header's of the target's (each cell has its own system
              tenant; each key is sent to its own cell only, and each asked of its cell)
    a  mark   the directory: the tenant moving (its writes answered 503 here from now on)
    b  freeze the source: its writes refused, its schedules stopped (409 for pools the target
              lacks: taken back at once); then the cells' recent-key caches run out
    c  export the source: its definitions, read once; its programs' bytes, one by one
    d  import the target: the bytes, then the definitions in one transaction (arriving)
    e  flip   the directory: its home the target, the source a previous home
    f  moved  the source: the tenant answered "moved to cell …" there from now on
    g  taken  the target: the tenant at home (its schedules fire from the exported instant)

A failure before the flip takes back what was done (the import removed, the source unfrozen,
the directory's mark dropped) and answers the failure: the tenant stays where it was and the
move can be run again. A failure of the flip or after it leaves the move under way (the
tenant's writes still answered 503): the same move run again goes on from where it stopped.
A tenant moves back to a cell it left the same way (imported there as returning).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from herder.directory.repository import Directory
from herder.domain.cells import Cell, Home, TenantMoved
from herder.domain.errors import Conflict, Forbidden, NotFound, Unauthorized
from herder.edge.admin import Refused, ask, authorization_of, check_system_admin_key, passed_on
from herder.edge.routing import ToTenant, bearer_token, key_destination

log = logging.getLogger("herder.edge")
TARGET_KEY_HEADER = "x-herder-target-key"  # the target cell's system admin's key


@dataclass(frozen=True)
class Leg:
    """One cell of a move and the key its calls carry (never the other cell's)."""

    cell: Cell
    key: dict[str, str]
    header: str  # where the caller gave the key, for a refusal to name


class Mover:
    def __init__(self, http: httpx.AsyncClient, directory: Directory) -> None:
        self.http = http
        self.directory = directory

    async def move(self, request: Request, to: str, tenant_id: str) -> Response:
        target_cell = await run_in_threadpool(self.directory.cell, to)
        home = await run_in_threadpool(self.directory.home_of, tenant_id)
        if home is None:
            raise NotFound(f"tenant {tenant_id[:64]} is in no cell the directory knows")
        under_way = await run_in_threadpool(self.directory.move_under_way, tenant_id)
        source = Leg(
            source_of(home, target_cell, under_way), authorization_of(request), "Authorization"
        )
        target = Leg(target_cell, _target_key(request), "X-Herder-Target-Key")
        for leg in (source, target):
            await self._check_admin(leg)
        artifacts = schedules = 0  # a move that stopped after its flip copied them
        if home.cell.name != target.cell.name:
            pools = await self._pools_of(target)
            await run_in_threadpool(
                self.directory.begin_move,
                tenant_id,
                source.cell.name,
                target.cell.name,
                datetime.now(UTC),
            )
            try:
                artifacts, schedules = await self._copy(tenant_id, source, target, pools)
            except Refused as refused:
                await self._take_back(tenant_id, source, target)
                return refused.response
            except Exception:
                await self._take_back(tenant_id, source, target)
                raise
            # not taken back if it fails: it may have flipped (the move, run again, goes on)
            await run_in_threadpool(
                self.directory.flip,
                tenant_id,
                source.cell.name,
                target.cell.name,
                datetime.now(UTC),
            )
        try:  # steps f and g
            await _expect(self.http, source, f"/v1/tenants/{tenant_id}/move", "PUT",
                          {"state": "moved", "cell": target.cell.name})  # fmt: skip
            await _expect(
                self.http, target, f"/v1/tenants/{tenant_id}/move", "PUT", {"state": None}
            )
        except Refused as refused:
            log.warning("tenant %s moved to cell %s, not yet finished: run again", tenant_id, to)
            return refused.response
        await run_in_threadpool(self.directory.end_move, tenant_id)
        moved = TenantMoved(
            tenant_id=tenant_id,
            from_cell=source.cell.name,
            to_cell=target.cell.name,
            schedules=schedules,
            artifacts=artifacts,
        )
        return JSONResponse(moved.model_dump(mode="json"))

    async def _check_admin(self, leg: Leg) -> None:
        """The key is a system admin's of its own cell; a key is never shown to a cell its
        tenant does not live in."""
        if not leg.key:
            raise Unauthorized(f"missing API key for cell {leg.cell.name}: send {leg.header}")
        routed = key_destination(leg.key["Authorization"])
        if isinstance(routed, ToTenant):
            home = await run_in_threadpool(self.directory.home_of, routed.tenant_id)
            if home is not None and home.cell.name != leg.cell.name:
                raise Forbidden(
                    f"a key of cell {leg.cell.name}'s system admins is needed ({leg.header}): "
                    f"this key's tenant lives in cell {home.cell.name}"
                )
        elif not leg.cell.is_default:
            raise Forbidden(f"a key of cell {leg.cell.name}'s system admins is needed")
        await check_system_admin_key(self.http, leg.key, leg.cell)

    async def _pools_of(self, target: Leg) -> list[str]:
        names: list[str] = []
        cursor: str | None = None
        while True:
            params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            answer = await ask(
                self.http, target.cell, "GET", "/v1/pools", params=params, headers=target.key
            )
            if answer.status_code != 200:
                raise Refused(passed_on(answer))
            page = answer.json()
            names += [str(pool["name"]) for pool in page["items"]]
            cursor = page.get("next_cursor")
            if not cursor:
                return names

    async def _copy(
        self, tenant_id: str, source: Leg, target: Leg, pools: list[str]
    ) -> tuple[int, int]:
        """Steps b to d: the tenant frozen in the source, exported, imported in the target;
        the numbers of programs and schedules copied."""
        tenant = f"/v1/tenants/{tenant_id}"
        freeze = {"state": "frozen", "cell": target.cell.name, "pools": pools}
        # no wait for a write admitted before the freeze: the cell orders its writes
        # against the freeze by the tenant's row (``store/moves/guard.py``)
        await _expect(self.http, source, f"{tenant}/move", "PUT", freeze)
        document = (await _expect(self.http, source, f"{tenant}/export")).json()
        document["from_cell"] = source.cell.name
        digests = [str(row["sha256"]) for row in document["tables"].get("artifacts", [])]
        for sha256 in digests:
            content = await _expect(self.http, source, f"{tenant}/export/artifacts/{sha256}")
            await _expect(self.http, target, f"{tenant}/import/artifacts/{sha256}", "PUT",
                          content=content.content)  # fmt: skip
        await _expect(self.http, target, "/v1/tenants/import", "POST", document)
        return len(digests), len(document["tables"].get("schedules", []))

    async def _take_back(self, tenant_id: str, source: Leg, target: Leg) -> None:
        """A failure before the flip: the tenant left where it was. A step that cannot be
        taken back now (a cell down) is logged; the move run again puts it right."""
        steps = (
            (target, "DELETE", f"/v1/tenants/{tenant_id}/import", None),
            (source, "PUT", f"/v1/tenants/{tenant_id}/move", {"state": None}),
        )
        for leg, method, path, body in steps:
            try:
                answer = await ask(self.http, leg.cell, method, path, headers=leg.key, json=body)
                if answer.status_code >= 400 and answer.status_code != 409:
                    log.warning("taking back a move: %s %s answered %s", method, path, answer)
            except Refused:
                log.warning(
                    "taking back a move: cell %s did not answer %s %s", leg.cell.name, method, path
                )
        await run_in_threadpool(self.directory.end_move, tenant_id)


def source_of(home: Home, target: Cell, under_way: tuple[str, str] | None) -> Cell:
    """The cell the tenant leaves: its home, or (a move stopped after its flip) the one the
    move under way names."""
    if home.cell.name != target.name:
        if under_way is not None and under_way[1] != target.name:
            raise Conflict(f"tenant is moving to cell {under_way[1]} already")
        return home.cell
    if under_way is not None and under_way[1] == target.name:
        for cell in home.previous:
            if cell.name == under_way[0]:
                return cell
    raise Conflict(f"the tenant lives in cell {target.name} already")


def _target_key(request: Request) -> dict[str, str]:
    """The target cell's key: the ``X-Herder-Target-Key`` header (a token, or ``Bearer``
    and a token), else the request's own key (one key that is both cells' admins')."""
    given = request.headers.get(TARGET_KEY_HEADER)
    if given is None:
        return authorization_of(request)
    token = bearer_token(given) or given.strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _expect(
    http: httpx.AsyncClient,
    leg: Leg,
    path: str,
    method: str = "GET",
    body: object = None,
    *,
    content: bytes | None = None,
) -> httpx.Response:
    """A step's call: its refusal (``passed_on``) or silence (503 naming the cell) stops the
    move as ``Refused``."""
    options: dict[str, object] = {}
    if content is not None:
        options = {
            "content": content,
            "headers": {**leg.key, "Content-Type": "application/octet-stream"},
        }
    elif body is not None:
        options = {
            "content": json.dumps(body),
            "headers": {**leg.key, "Content-Type": "application/json"},
        }
    else:
        options = {"headers": leg.key}
    answer = await ask(http, leg.cell, method, path, **options)
    if answer.status_code >= 300:
        raise Refused(passed_on(answer))
    return answer
