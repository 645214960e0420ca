"""``herder usage`` and ``herder budgets …``: what tenants used against their time budgets
(docs/budgets.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from herder.cli.common import JsonFlag, app, client, fail, out, print_json, when
from herder.cli.ids import JOB, TENANT, names_of, tenant_of
from herder.cli.views import Field, Listing
from herder.client import HerderClient
from herder.domain.budgets import Period, TenantBudgets
from herder.domain.usage import UsageGroup, UsageReport

budgets_app = typer.Typer(
    help="Tenants' time budgets (system admins set them).", no_args_is_help=True
)
app.add_typer(budgets_app, name="budgets")


def _usage_tables(herder: HerderClient, report: UsageReport) -> tuple[Listing, Listing]:
    """The usage and budget tables, tenants and jobs by name where the caller may list
    them."""
    tenant_ids = {row.tenant_id for row in report.rows} | {
        standing.tenant_id for standing in report.budgets
    }
    tenants = names_of(herder, TENANT, tenant_ids)
    jobs = names_of(herder, JOB, {row.job_id for row in report.rows if row.job_id})
    rows = Listing(
        "TENANT", "POOL", "JOB", "CPU-SECONDS", Field("GPU-SECONDS", drop=1), Field("SINCE", drop=2)
    )
    for row in report.rows:
        job = jobs.get(row.job_id, row.job_id) if row.job_id else "-"
        rows.add_row(
            tenants.get(row.tenant_id, row.tenant_id), row.pool or "-", job,
            f"{row.cpu_seconds:.1f}",
            f"{row.gpu_seconds:.1f}", when(row.period_start),
        )  # fmt: skip
    budgets = Listing(
        "TENANT", "BUDGET", "CPU USED / LIMIT", Field("GPU USED / LIMIT", drop=1), "USED",
        Field("RESETS", drop=2),
    )  # fmt: skip
    for standing in report.budgets:
        budget = standing.budget
        used = f"{standing.fraction:.0%}{' (spent)' if standing.spent else ''}"
        budgets.add_row(
            tenants.get(standing.tenant_id, standing.tenant_id), budget.name,
            _of(standing.cpu_seconds, budget.cpu_seconds),
            _of(standing.gpu_seconds, budget.gpu_seconds), used, when(standing.resets_at),
        )  # fmt: skip
    return rows, budgets


def _of(used: float, limit: float | None) -> str:
    return "-" if limit is None else f"{used:.0f} / {limit:.0f}"


@app.command("usage")
def usage(
    period: Annotated[Period, typer.Option(help="the current day, week or month")] = Period.DAY,
    by: Annotated[UsageGroup, typer.Option("--by", help="rows per tenant, pool or job")] = (
        UsageGroup.TENANT
    ),
    tenant: Annotated[
        str | None, typer.Option(help="one tenant's name or id (system admins)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """CPU- and GPU-seconds used in the current period, and each budget against it."""
    with client() as herder:
        report = herder.usage(period, by, tenant_of(herder, tenant).id if tenant else None)
        if as_json:
            print_json(report)
            return
        rows, budgets = _usage_tables(herder, report)
    out.print(rows)
    if report.budgets:
        out.print(budgets)


@budgets_app.command("show")
def budgets_show(tenant: str, as_json: JsonFlag = False) -> None:
    """A tenant's budgets (by its name, id or the start of its id) and their time zone."""
    with client() as herder:
        budgets = herder.get_budgets(tenant_of(herder, tenant).id)
    if as_json:
        print_json(budgets)
        return
    out.print(f"time zone {budgets.time_zone}")
    for budget in budgets.budgets:
        limits = [
            f"{kind} {limit:g} s"
            for kind, limit in (("cpu", budget.cpu_seconds), ("gpu", budget.gpu_seconds))
            if limit is not None
        ]
        out.print(f"{budget.name}: {', '.join(limits)}")


@budgets_app.command("set")
def budgets_set(
    tenant: str,
    file: Annotated[Path, typer.Argument(help="JSON: {time_zone, budgets: [...]}")],
    as_json: JsonFlag = False,
) -> None:
    """Replace a tenant's budgets with those in FILE (docs/budgets.md)."""
    try:
        budgets = TenantBudgets.model_validate_json(file.read_bytes())
    except (OSError, ValidationError) as error:
        raise fail(f"{file}: {error}") from error
    with client() as herder:
        found = tenant_of(herder, tenant)
        saved = herder.set_budgets(found.id, budgets)
    if as_json:
        print_json(saved)
    else:
        out.print(f"{len(saved.budgets)} budget(s) set for {found.name} ({saved.time_zone})")
