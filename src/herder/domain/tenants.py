"""What a tenant may use: its fair-share weight's companions, the quotas and the submit rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.checkpoints import DEFAULT_MAX_CHECKPOINT_MB
from herder.domain.jobs import Priority


class TenantQuotas(BaseModel):
    """Limits that hold a tenant's runs back (in use, queued) or slow its submissions, and
    bound what it stores.

    ``None`` means unlimited. Runs over a usage quota stay queued with a waiting reason;
    only submissions faster than the rate are refused (429). ``max_queued`` also bounds the
    runs made for the tenant (``domain.queue_room``). ``max_checkpoint_mb`` alone has a
    bound unless set (``DEFAULT_MAX_CHECKPOINT_MB``): a save past it is refused (409).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cpu: Annotated[float | None, Field(gt=0, description="cores in use at once")] = None
    max_memory_mb: Annotated[int | None, Field(ge=1)] = None
    max_gpus: Annotated[int | None, Field(ge=0)] = None
    max_queued: Annotated[
        int | None,
        Field(
            ge=1,
            description="queued runs the dispatcher considers at once; runs that workflows, "
            "backfills and schedules make wait (held) or are skipped past it",
        ),
    ] = None
    max_priority: Annotated[
        Priority | None,
        Field(
            description="the highest class a run may ask for when submitted or "
            "re-prioritised (its job's own class is the job's developers' to choose)"
        ),
    ] = None
    max_checkpoint_mb: Annotated[
        int | None,
        Field(
            ge=1,
            description="MiB its runs' checkpoints may keep in the store, all together: a save "
            f"past it is refused (default {DEFAULT_MAX_CHECKPOINT_MB}; null: unlimited)",
        ),
    ] = DEFAULT_MAX_CHECKPOINT_MB
    submit_rate_per_second: Annotated[float | None, Field(gt=0)] = None
    submit_burst: Annotated[
        int | None, Field(ge=1, description="submissions allowed at once (default: 1 s of rate)")
    ] = None


def stored_quotas(quotas: TenantQuotas) -> dict[str, object]:
    """As the store keeps them: what differs from the defaults, so a quota left at its
    default follows the default, and an explicit ``None`` (unlimited) of a quota that has
    one is kept."""
    return quotas.model_dump(mode="json", exclude_defaults=True)


@dataclass(frozen=True)
class DefaultPoolChange:
    """A tenant's default pool, set (a pool's name) or cleared (None: the shared fleet)."""

    pool: str | None
