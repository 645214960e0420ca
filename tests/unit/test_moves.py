"""A tenant's move between cells, its pure decisions (``domain.moves``): which shifts of its
state a cell takes and which it refuses for the tenant's pools or backfills, which imports
it takes, which requests each state refuses and how, which pools a target lacks, what a
move's document admits, which cell a move (or one run again) leaves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from herder.domain.cells import Cell, Home
from herder.domain.errors import Conflict
from herder.domain.moves import (
    FROZEN_RETRY_SECONDS,
    MOVED_RETRY_SECONDS,
    MoveFacts,
    MoveState,
    TenantExport,
    arrival,
    import_refusal,
    is_history,
    may_shift,
    pools_lacking,
    refusal,
    shift_refusal,
)
from herder.edge.moves import source_of

FROZEN, MOVED, ARRIVING = MoveState.FROZEN, MoveState.MOVED, MoveState.ARRIVING
RETURNING = MoveState.RETURNING


@pytest.mark.parametrize(
    ("current", "current_cell", "wanted", "cell", "allowed"),
    [
        (None, None, FROZEN, "b", True),  # the source freezes it
        (FROZEN, "b", FROZEN, "b", True),  # again, the same move run again
        (FROZEN, "b", FROZEN, "c", False),  # frozen for another move
        (FROZEN, "b", None, None, True),  # taken back before the flip
        (FROZEN, "b", MOVED, "b", True),  # flipped
        (FROZEN, "b", MOVED, "c", False),  # moved elsewhere than it froze for
        (MOVED, "b", MOVED, "b", True),
        (MOVED, "b", None, None, False),  # a moved tenant never comes back by a shift
        (MOVED, "b", FROZEN, "b", False),
        (None, None, MOVED, "b", False),  # never moved without a freeze
        (None, None, ARRIVING, "a", False),  # arriving only by an import
        (ARRIVING, "a", None, None, True),  # taken in
        (ARRIVING, "a", FROZEN, "c", False),
        (RETURNING, "a", None, None, True),  # taken in where it lived before
        (None, None, RETURNING, "a", False),  # returning only by an import
        (None, None, None, None, True),  # at home, asked again
    ],
)
def test_the_shifts_a_tenant_may_take(
    current: MoveState | None,
    current_cell: str | None,
    wanted: MoveState | None,
    cell: str | None,
    allowed: bool,
) -> None:
    assert may_shift(current, current_cell, wanted, cell) is allowed


def _facts(
    state: MoveState | None = None,
    *,
    is_system: bool = False,
    pools: tuple[str | None, ...] = (None, "cpu"),
    backfills: tuple[str, ...] = (),
) -> MoveFacts:
    cell = None if state is None else "b"
    return MoveFacts("ten_1", state, cell, is_system, pools, backfills)


@pytest.mark.parametrize(
    ("facts", "wanted", "target_pools", "refused", "field"),
    [
        (_facts(), FROZEN, ["cpu"], None, None),
        (_facts(), FROZEN, None, None, None),  # pools not named: not checked
        (_facts(is_system=True), FROZEN, ["cpu"], "never moves", None),
        (_facts(MOVED), FROZEN, ["cpu"], "cannot be made frozen", None),
        (_facts(pools=("gpu", "cpu")), FROZEN, ["cpu"], "pools tenant ten_1 uses: gpu", "pools"),
        (_facts(backfills=("bkf_1", "bkf_2")), FROZEN, ["cpu"], "bkf_1, bkf_2", "backfills"),
        # only a freeze from home asks: a move under way goes on, a taken-back one goes home
        (_facts(FROZEN, backfills=("bkf_1",)), FROZEN, ["cpu"], None, None),
        (_facts(FROZEN, backfills=("bkf_1",)), None, None, None, None),
    ],
)
def test_the_shifts_a_cell_refuses(
    facts: MoveFacts,
    wanted: MoveState | None,
    target_pools: list[str] | None,
    refused: str | None,
    field: str | None,
) -> None:
    answer = shift_refusal(facts, wanted, None if wanted is None else "b", target_pools)
    if refused is None:
        assert answer is None
        return
    assert answer is not None
    assert refused in answer.detail
    assert answer.field == field


@pytest.mark.parametrize(
    ("here", "from_cell", "refused"),
    [
        (None, "a", None),  # not here: imported
        ((ARRIVING, "a"), "a", None),  # this move's partial import: replaced
        ((ARRIVING, "c"), "a", "arriving here from cell c"),  # another move's
        ((None, None), "a", "already lives in this cell"),
        ((FROZEN, "b"), "a", "already lives in this cell"),
        ((MOVED, "b"), "b", None),  # it comes back to a cell it left
        ((MOVED, "c"), "b", None),  # by way of another (the directory says where it lives)
        ((RETURNING, "b"), "b", None),  # its return imported again: replaced again
        ((RETURNING, "b"), "c", "returning here from cell b"),
    ],
)
def test_the_imports_a_cell_takes(
    here: tuple[MoveState | None, str | None] | None, from_cell: str, refused: str | None
) -> None:
    answer = import_refusal("ten_1", here, from_cell)
    assert (answer is None) is (refused is None)
    if refused is not None:
        assert answer is not None
        assert refused in answer.detail


@pytest.mark.parametrize(
    ("here", "becomes"),
    [(None, ARRIVING), ((ARRIVING, "a"), ARRIVING), ((MOVED, "b"), RETURNING),
     ((RETURNING, "b"), RETURNING)],
)  # fmt: skip
def test_a_tenant_imported_where_it_lived_returns_with_its_history(
    here: tuple[MoveState | None, str | None] | None, becomes: MoveState
) -> None:
    assert arrival(here) is becomes


@pytest.mark.parametrize(
    ("state", "method", "path", "refused", "retry"),
    [
        (None, "POST", "/v1/jobs", None, None),
        (FROZEN, "GET", "/v1/jobs", None, None),
        (FROZEN, "HEAD", "/v1/jobs", None, None),
        (FROZEN, "POST", "/v1/jobs", "is moving to cell b", FROZEN_RETRY_SECONDS),
        (FROZEN, "DELETE", "/v1/jobs/job_1", "is moving to cell b", FROZEN_RETRY_SECONDS),
        (ARRIVING, "PUT", "/v1/secrets/S", "is moving here from cell b", FROZEN_RETRY_SECONDS),
        (ARRIVING, "GET", "/v1/jobs", None, None),
        (RETURNING, "POST", "/v1/jobs", "is moving here from cell b", FROZEN_RETRY_SECONDS),
        (RETURNING, "GET", "/v1/jobs", None, None),
        (MOVED, "GET", "/v1/jobs", "moved to cell b", MOVED_RETRY_SECONDS),
        (MOVED, "GET", "/v1/runs", "moved to cell b", MOVED_RETRY_SECONDS),  # a listing
        (MOVED, "POST", "/v1/runs/run_1/cancel", "moved to cell b", MOVED_RETRY_SECONDS),
        (MOVED, "GET", "/v1/runs/run_1", None, None),  # its history, by id
        (MOVED, "GET", "/v1/runs/run_1/logs", None, None),
        (MOVED, "GET", "/v1/workflow-runs/wfr_1", None, None),
        (MOVED, "GET", "/v1/events/evt_1", None, None),
    ],
)
def test_what_each_state_refuses(
    state: MoveState | None, method: str, path: str, refused: str | None, retry: int | None
) -> None:
    answer = refusal("ten_1", state, "b", method, path)
    if refused is None:
        assert answer is None
        return
    assert answer is not None
    assert refused in answer.detail
    assert answer.detail.startswith("tenant ten_1 ")
    assert (answer.cell, answer.retry_after_seconds) == ("b", retry)


@pytest.mark.parametrize(
    ("path", "history"),
    [
        ("/v1/runs/run_1", True),
        ("/v1/runs/run_1/attempts", True),
        ("/v1/runs", False),
        ("/v1/runs/", False),
        ("/v1/jobs/job_1", False),
        ("/v1/workflow-runs/wfr_1/tasks", True),
        ("/v1/events", False),
    ],
)
def test_which_paths_read_history_by_id(path: str, history: bool) -> None:
    assert is_history(path) is history


def test_the_pools_a_target_lacks() -> None:
    assert pools_lacking(["gpu", None, "cpu", "gpu"], ["cpu"]) == ["gpu"]
    assert pools_lacking([None], []) == []


def test_a_document_names_its_tenant_and_nothing_else() -> None:
    document = TenantExport(tenant_id="ten_01ABC", tables={"tenants": [{"id": "ten_01ABC"}]})
    assert document.format == 1
    assert document.rows("jobs") == []
    assert TenantExport(
        tenant_id="ten_1", tables={"artifacts": [{"sha256": "ab"}, {"sha256": "cd"}]}
    ).artifacts == ["ab", "cd"]
    for wrong in [
        {"tenant_id": "../ten_1", "tables": {}},
        {"tenant_id": "ten_1", "tables": {}, "format": 2},
        {"tenant_id": "ten_1", "tables": {}, "secrets_key": "k"},
    ]:
        with pytest.raises(ValidationError):
            TenantExport.model_validate(wrong)


def _cell(name: str) -> Cell:
    return Cell(name=name, region="eu", api_url=f"http://{name}", is_default=False,
                created_at=datetime(2026, 12, 7, tzinfo=UTC))  # fmt: skip


@pytest.mark.parametrize(
    ("home", "previous", "under_way", "target", "source"),
    [
        ("a", [], None, "b", "a"),  # a move begins
        ("a", [], ("a", "b"), "b", "a"),  # one that stopped before its flip, run again
        ("b", ["a"], ("a", "b"), "b", "a"),  # one that stopped after its flip: finished
        ("a", [], ("a", "c"), "b", None),  # moving elsewhere already
        ("b", ["a"], None, "b", None),  # it lives there
        ("b", [], ("c", "b"), "b", None),  # a source it never lived in
    ],
)
def test_the_cell_a_move_leaves(
    home: str,
    previous: list[str],
    under_way: tuple[str, str] | None,
    target: str,
    source: str | None,
) -> None:
    where = Home(cell=_cell(home), previous=[_cell(name) for name in previous])
    if source is None:
        with pytest.raises(Conflict):
            source_of(where, _cell(target), under_way)
    else:
        assert source_of(where, _cell(target), under_way).name == source
