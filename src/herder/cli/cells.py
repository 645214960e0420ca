"""``herder cell …``: the cells behind an edge (docs/cells.md), for the system's admins; the
CLI's server is then the edge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from herder.cli.common import JsonFlag, app, client, out, print_json, when
from herder.cli.ids import tenant_of
from herder.cli.tenants import tenant_app
from herder.cli.views import Field, Listing
from herder.domain.cells import CellStatus

cell_app = typer.Typer(help="Cells and regions behind an edge.", no_args_is_help=True)
app.add_typer(cell_app, name="cell")


def _cell_table(cells: list[CellStatus]) -> Listing:
    table = Listing("NAME", "REGION", "STATE", "TENANTS", "API", Field("CREATED", drop=1))
    for cell in cells:
        name = f"{cell.name} (default)" if cell.is_default else cell.name
        state = "[green]up[/]" if cell.up else "[bold red]down[/]"
        table.add_row(
            name, cell.region, state, str(cell.tenants), cell.api_url, when(cell.created_at)
        )
    return table


@cell_app.command("list")
def cell_list(as_json: JsonFlag = False) -> None:
    """List the cells, each with its health (its API's /readyz, asked now) and tenants."""
    with client() as herder:
        listing = herder.list_cells()
    if as_json:
        print_json(listing)
    else:
        out.print(_cell_table(listing.items))


@cell_app.command("create")
def cell_create(
    name: str,
    region: Annotated[str, typer.Option(help="its region (made when first named)")],
    api_url: Annotated[str, typer.Option(help="where the cell's API processes answer")],
    as_json: JsonFlag = False,
) -> None:
    """Register a cell: a whole Herder (its database, schedulers, workers, API) already
    running at --api-url."""
    with client() as herder:
        created = herder.create_cell(name, region=region, api_url=api_url)
    if as_json:
        print_json(created)
    else:
        out.print(f"created cell [bold]{created.name}[/] in region {created.region}")


@cell_app.command("adopt")
def cell_adopt(name: str, as_json: JsonFlag = False) -> None:
    """Place in the directory the tenants a cell has that it lacks (those made there before
    cells); takes a system admin's key of that cell."""
    with client() as herder:
        adopted = herder.adopt_tenants(name)
    if as_json:
        out.print_json(json.dumps(adopted))
        return
    out.print(f"placed {len(adopted['placed'])} tenant(s) in cell {name}")
    for tenant, home in adopted["elsewhere"].items():
        out.print(f"left {tenant}: it lives in cell {home}", highlight=False)


@tenant_app.command("move")
def tenant_move(
    tenant: str,
    to: Annotated[str, typer.Option("--to", help="the cell it moves to")],
    target_key_file: Annotated[
        Path | None,
        typer.Option(help="a file holding a system admin's key of the cell it moves to"),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Move a tenant to another cell: its definitions, keys, secrets and schedules go; its
    runs stay, readable by id. The key in use is a system admin's of the cell it lives in."""
    target_key = target_key_file.read_text().strip() if target_key_file else None
    with client() as herder:
        found = tenant_of(herder, tenant)
        moved = herder.move_tenant(found.id, to, target_key=target_key)
    if as_json:
        print_json(moved)
    else:
        out.print(
            f"moved tenant [bold]{found.name}[/] from cell {moved.from_cell} to cell "
            f"{moved.to_cell} ({moved.schedules} schedule(s), {moved.artifacts} program(s))"
        )
