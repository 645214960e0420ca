"""The cell a new tenant of a region goes to, as a table: (the cells as the edge lists them,
the region asked for) → the cell chosen, or why none.

A cell is written ``name region up|down tenants``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.domain.cell_choice import NoCell, cell_for_new_tenant
from herder.domain.cells import CellStatus

MADE = datetime(2026, 12, 7, tzinfo=UTC)


def cell(written: str) -> CellStatus:
    name, region, state, tenants = written.split()
    return CellStatus(
        name=name,
        region=region,
        api_url=f"http://{name}.internal:8080",
        is_default=name == "a",
        created_at=MADE,
        up=state == "up",
        tenants=int(tenants),
    )


TABLE = [
    # the fewest tenants wins, whatever the order listed
    (["a eu up 3", "b eu up 1", "c eu up 2"], "eu", "b"),
    (["c eu up 2", "b eu up 1", "a eu up 3"], "eu", "b"),
    # a tie goes to the first by name
    (["c eu up 1", "b eu up 1"], "eu", "b"),
    # a cell that is down takes none, however empty
    (["a eu up 9", "b eu down 0"], "eu", "a"),
    # another region's cells are never chosen, however empty
    (["a eu up 9", "b us up 0"], "eu", "a"),
    (["a eu up 9", "b us up 0"], "us", "b"),
]


@pytest.mark.parametrize(("written", "region", "chosen"), TABLE)
def test_the_cell_of_the_region_that_is_up_with_the_fewest_tenants_is_chosen(
    written: list[str], region: str, chosen: str
) -> None:
    found = cell_for_new_tenant([cell(one) for one in written], region)
    assert isinstance(found, CellStatus)
    assert found.name == chosen


REFUSED = [
    (["a eu up 1", "b us up 1"], "asia", "no cell is in region 'asia'; regions: eu, us"),
    ([], "eu", "no cell is in region 'eu'; regions: none"),
    (["a eu down 1", "b eu down 0", "c us up 0"], "eu", "no cell of region eu is up (down: a, b)"),
]


@pytest.mark.parametrize(("written", "region", "reason"), REFUSED)
def test_a_region_unknown_or_with_no_cell_up_says_why(
    written: list[str], region: str, reason: str
) -> None:
    assert cell_for_new_tenant([cell(one) for one in written], region) == NoCell(reason)


CELLS = st.lists(
    st.builds(
        "{} {} {} {}".format,
        st.sampled_from("abcdef"),
        st.sampled_from(["eu", "us"]),
        st.sampled_from(["up", "down"]),
        st.integers(0, 5),
    ),
    unique_by=lambda written: written.split()[0],
)


@given(CELLS)
def test_the_chosen_cell_is_up_in_the_region_and_none_there_has_fewer_tenants(
    written: list[str],
) -> None:
    cells = [cell(one) for one in written]
    found = cell_for_new_tenant(cells, "eu")
    open_in_region = [one for one in cells if one.region == "eu" and one.up]
    if not open_in_region:
        assert isinstance(found, NoCell)
        return
    assert isinstance(found, CellStatus)
    assert found in open_in_region
    assert all(found.tenants <= other.tenants for other in open_in_region)
