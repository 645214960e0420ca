"""``herder tenant …``: tenants, their fair-share weights and quotas (system admins)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from herder.cli.answers import print_created, print_listing
from herder.cli.common import JsonFlag, app, client, fail, out, pairs, print_json, when
from herder.cli.ids import QuietFlag, id_table, tenant_of
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.client.cells import AnsweringCell
from herder.domain.cell_choice import NoCell, cell_for_new_tenant
from herder.domain.cells import CellStatus
from herder.domain.models import Tenant
from herder.domain.tenants import TenantQuotas

tenant_app = typer.Typer(help="Tenants, their weights and quotas.", no_args_is_help=True)
app.add_typer(tenant_app, name="tenant")

# The quota flags, as typed on the command line, and the quotas they set.
QUOTA_FLAGS = {
    "max-cpu": "max_cpu",
    "max-memory-mb": "max_memory_mb",
    "max-gpus": "max_gpus",
    "max-queued": "max_queued",
    "max-checkpoint-mb": "max_checkpoint_mb",
    "submit-rate": "submit_rate_per_second",
    "submit-burst": "submit_burst",
}

DEFAULT_POOL_FLAG = "default-pool"  # --clear default-pool: the shared fleet again

Weight = Annotated[int | None, typer.Option(help="fair-share weight, 1 to 1000")]
MaxCpu = Annotated[float | None, typer.Option("--max-cpu", help="cores in use at once")]
MaxMemory = Annotated[int | None, typer.Option("--max-memory-mb", help="memory in use, MB")]
MaxGpus = Annotated[int | None, typer.Option("--max-gpus", help="GPUs in use at once")]
MaxQueued = Annotated[
    int | None, typer.Option("--max-queued", help="queued runs the dispatcher considers")
]
MaxCheckpoint = Annotated[
    int | None,
    typer.Option(
        "--max-checkpoint-mb",
        help="MiB its runs' checkpoints may keep, all together (default 4096)",
    ),
]
SubmitRate = Annotated[
    float | None, typer.Option("--submit-rate", help="run submissions per second")
]
SubmitBurst = Annotated[
    int | None, typer.Option("--submit-burst", help="submissions at once (default: 1 s of rate)")
]


def _limit(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def _rate(quotas: TenantQuotas) -> str:
    if quotas.submit_rate_per_second is None:
        return "-"
    burst = f", burst {quotas.submit_burst}" if quotas.submit_burst else ""
    return f"{quotas.submit_rate_per_second:g}/s{burst}"


def _tenant_table(tenants: list[Tenant], *, whole_ids: bool = False) -> Listing:
    """Tenants and their quotas; at 80 columns the creation, the default pool, the submit
    rate and the quotas give way, the least used first."""
    table, shown = id_table(
        (tenant.id for tenant in tenants), "NAME", "WEIGHT", Field("MAX CPU", drop=6),
        Field("MAX MEMORY", drop=7), Field("MAX GPUS", drop=8), Field("MAX QUEUED", drop=5),
        Field("MAX CHECKPOINTS", drop=9), Field("SUBMIT RATE", drop=4),
        Field("DEFAULT POOL", drop=3), Field("CREATED", drop=2), whole_ids=whole_ids,
    )  # fmt: skip
    for tenant in tenants:
        quotas = tenant.quotas
        name = f"{tenant.name} (system)" if tenant.is_system else tenant.name
        if tenant.move_state is not None:
            name += f" ({tenant.move_state}, cell {tenant.move_cell})"  # docs/cells.md
        table.add_row(
            shown[tenant.id], name, str(tenant.weight), _limit(quotas.max_cpu),
            _limit(quotas.max_memory_mb, " MB"), _limit(quotas.max_gpus),
            _limit(quotas.max_queued), _limit(quotas.max_checkpoint_mb, " MiB"), _rate(quotas),
            tenant.default_pool or "-",
            when(tenant.created_at),
        )  # fmt: skip
    return table


def _cell_fields(answered: AnsweringCell | None) -> list[tuple[str, str | None]]:
    """The cell and region an answer came from, as a record's fields: none unless it came
    through an edge (``herder up`` and a cell's own address name no cell)."""
    if answered is None:
        return []
    return [("cell", answered.name), ("region", answered.region)]


def _in_cell(answered: AnsweringCell | None) -> str:
    if answered is None:
        return ""
    region = f", region {answered.region}" if answered.region else ""
    return f" in cell {answered.name}{region}"


def _cell_keys(given: list[str]) -> dict[str, str]:
    """Each ``--cell-key-file CELL=FILE`` as the cell and the key its file holds, all read
    before any call: a file that cannot be read fails before anything is made."""
    keys = {}
    for cell, path in pairs(given, "--cell-key-file").items():
        try:
            keys[cell] = Path(path).expanduser().read_text().strip()
        except OSError as error:
            raise fail(f"--cell-key-file {cell}={path}: {error.strerror or error}") from None
        if not keys[cell]:
            raise fail(f"--cell-key-file {cell}={path}: the file holds no key")
    return keys


def _cell_in_region(herder: HerderClient, region: str) -> CellStatus:
    """The cell of ``region`` a new tenant goes to (``domain.cell_choice``), from the cells
    the edge lists now (the key in use: a system admin's of the default cell)."""
    chosen = cell_for_new_tenant(herder.list_cells().items, region)
    if isinstance(chosen, NoCell):
        raise fail(chosen.reason)
    return chosen


def _quota_changes(given: dict[str, float | None], clear: list[str]) -> dict[str, Any]:
    unknown = [name for name in clear if name.removeprefix("--") not in QUOTA_FLAGS]
    if unknown:
        raise fail(f"--clear {unknown[0]}: not a quota; one of {', '.join(QUOTA_FLAGS)}")
    changes: dict[str, Any] = {
        QUOTA_FLAGS[flag]: value for flag, value in given.items() if value is not None
    }
    for name in clear:
        field = QUOTA_FLAGS[name.removeprefix("--")]
        if field in changes:
            raise fail(f"--clear {name} and a value for it: choose one")
        changes[field] = None
    return changes


@tenant_app.command("list")
def tenant_list(limit: int = 100, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    """List tenants, newest first. Through an edge, the cell listing them (the key's) and
    its region are named below."""
    with client() as herder:
        page = herder.list_tenants(limit=limit)
    print_listing(page, _tenant_table, as_json=as_json, quiet=quiet)
    if herder.answered_by is not None and not (as_json or quiet):
        out.print(f"tenants{_in_cell(herder.answered_by)}", style="dim", highlight=False)


@tenant_app.command("show")
def tenant_show(tenant: str, as_json: JsonFlag = False) -> None:
    """Show a tenant (by name, id or the start of its id) with its weight and quotas ('-':
    unlimited); through an edge, its cell and region too."""
    with client() as herder:
        found = tenant_of(herder, tenant)
    if as_json:
        print_json(found)
    else:
        title = Text(f"tenant {found.name}", style="bold")
        fields = _cell_fields(herder.answered_by)
        out.print(record_of(title, _tenant_table([found], whole_ids=True), *fields))


@tenant_app.command("create")
def tenant_create(
    name: str,
    weight: Weight = None,
    max_cpu: MaxCpu = None,
    max_memory_mb: MaxMemory = None,
    max_gpus: MaxGpus = None,
    max_queued: MaxQueued = None,
    max_checkpoint_mb: MaxCheckpoint = None,
    submit_rate: SubmitRate = None,
    submit_burst: SubmitBurst = None,
    cell: Annotated[
        str | None,
        typer.Option(help="through an edge: the cell it lives in (a system admin's key of it)"),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            help="through an edge: its region; it lives in the region's cell that is up with "
            "the fewest tenants (the key in use: a system admin's of the default cell)"
        ),
    ] = None,
    cell_key_file: Annotated[
        list[str],
        typer.Option(
            help="CELL=FILE: a file holding a system admin's key of CELL, sent to that cell "
            "only, to make the tenant there; repeatable (one per cell --region may choose)"
        ),
    ] = [],  # noqa: B006
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a tenant; quotas left out are unlimited (but --max-checkpoint-mb: 4096).
    Through an edge, it lives in the default cell, in --cell, or in a cell of --region."""
    if cell is not None and region is not None:
        raise fail("--cell and --region: choose one")
    if cell_key_file and cell is None and region is None:
        raise fail("--cell-key-file names a key for --cell or --region: give one of them")
    quotas = _quota_changes(
        {
            "max-cpu": max_cpu, "max-memory-mb": max_memory_mb, "max-gpus": max_gpus,
            "max-queued": max_queued, "max-checkpoint-mb": max_checkpoint_mb,
            "submit-rate": submit_rate, "submit-burst": submit_burst,
        },
        [],
    )  # fmt: skip
    keys = _cell_keys(cell_key_file)
    placed: AnsweringCell | None = None  # the cell --region chose
    with client() as herder:
        if region is not None:
            chosen = _cell_in_region(herder, region)
            if chosen.name not in keys and not chosen.is_default:
                raise fail(
                    f"cell {chosen.name} of region {region} is chosen: a tenant is made there "
                    f"with a system admin's key of it, --cell-key-file {chosen.name}=FILE"
                )
            cell, placed = chosen.name, AnsweringCell(chosen.name, chosen.region)
        if cell is None:
            created = herder.create_tenant(name, weight=weight or 1, quotas=quotas)
        else:
            created = herder.create_tenant_in(
                cell, name, weight=weight or 1, quotas=quotas, cell_key=keys.get(cell)
            )
    where = placed or herder.answered_by
    if where is None and cell is not None:
        where = AnsweringCell(cell, None)  # the answer named none: the cell it was sent to
    more = _in_cell(where)
    print_created(created, "tenant", as_json=as_json, quiet=quiet, more=more)


@tenant_app.command("update")
def tenant_update(
    tenant: str,
    weight: Weight = None,
    max_cpu: MaxCpu = None,
    max_memory_mb: MaxMemory = None,
    max_gpus: MaxGpus = None,
    max_queued: MaxQueued = None,
    max_checkpoint_mb: MaxCheckpoint = None,
    submit_rate: SubmitRate = None,
    submit_burst: SubmitBurst = None,
    default_pool: Annotated[
        str | None,
        typer.Option(help="the pool its runs that name none go to (one it has a share in)"),
    ] = None,
    clear: Annotated[
        list[str],
        typer.Option(
            help="remove a quota (unlimited), e.g. --clear max-gpus, or the default pool "
            "(--clear default-pool: the shared fleet); repeatable"
        ),
    ] = [],  # noqa: B006
    as_json: JsonFlag = False,
) -> None:
    """Change a tenant's weight, quotas or default pool; what is not named keeps its value."""
    clear_pool = DEFAULT_POOL_FLAG in [name.removeprefix("--") for name in clear]
    if clear_pool and default_pool is not None:
        raise fail(f"--clear {DEFAULT_POOL_FLAG} and --default-pool: choose one")
    changes = _quota_changes(
        {
            "max-cpu": max_cpu, "max-memory-mb": max_memory_mb, "max-gpus": max_gpus,
            "max-queued": max_queued, "max-checkpoint-mb": max_checkpoint_mb,
            "submit-rate": submit_rate, "submit-burst": submit_burst,
        },
        [name for name in clear if name.removeprefix("--") != DEFAULT_POOL_FLAG],
    )  # fmt: skip
    if weight is None and not changes and default_pool is None and not clear_pool:
        raise fail("nothing to change: give --weight, a quota flag, --default-pool or --clear")
    with client() as herder:
        updated = herder.update_tenant(
            tenant_of(herder, tenant).id,
            weight=weight,
            quotas=changes or None,
            default_pool=default_pool,
            clear_default_pool=clear_pool,
        )
    if as_json:
        print_json(updated)
    else:
        out.print(_tenant_table([updated], whole_ids=True))
