"""What a tenant may use: its fair-share weight's companions, the quotas and the submit rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.jobs import Priority


class TenantQuotas(BaseModel):
    """Limits that hold a tenant's runs back (in use, queued) or slow its submissions.

    ``None`` means unlimited. Runs over a usage quota stay queued with a waiting reason;
    only submissions faster than the rate are refused (429). ``max_queued`` also bounds the
    runs made for the tenant (``domain.queue_room``).
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
    submit_rate_per_second: Annotated[float | None, Field(gt=0)] = None
    submit_burst: Annotated[
        int | None, Field(ge=1, description="submissions allowed at once (default: 1 s of rate)")
    ] = None


@dataclass(frozen=True)
class DefaultPoolChange:
    """A tenant's default pool, set (a pool's name) or cleared (None: the shared fleet)."""

    pool: str | None
