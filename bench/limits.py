"""Scenario: limits by key in the dispatcher (issue 26).

The dispatch scenario's world (10,000 queued runs of 100 tenants, 500 idle workers) through
real ``Dispatcher.step()`` passes on PostgreSQL, as it is and with every run counted against
its tenant's limit ``bench``:

- **10,000 keys**: each run its own key (``max_running`` 1 per key: never binding, every key
  looked at);
- **10 keys**: the run's index modulo 10, ``max_running`` 100 per key and a rate of 1,000
  starts a minute: as many placed as without limits (the limits' cost alone);
- **10 keys, binding**: ``max_running`` 5 per key: most runs wait on their key, so the steady
  passes consider more waiting runs than without limits (the table says how many).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert, select, update

from bench.dispatch import SEED
from bench.dispatch_store import StoreResult, measure_postgres
from bench.dispatch_workload import make_world
from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.limits import LimitSpec, Rate
from herder.store.schema import limits, runs, tenants
from herder.store.store import Store


@dataclass(frozen=True)
class LimitsComparison:
    plain: StoreResult
    distinct_keys: StoreResult
    ten_keys: StoreResult
    ten_keys_binding: StoreResult


def keyed(spec: LimitSpec, keys: int | None) -> Callable[[Store], None]:
    """A preparation: each tenant gets limit ``bench`` (``spec``); each run counts against
    its tenant's, under key ``k<index>`` (``keys`` None) or ``k<index mod keys>``."""

    def prepare(store: Store) -> None:
        now = datetime.now(UTC)
        with store.database.write() as connection:
            limit_of = {}
            for tenant_id in connection.execute(select(tenants.c.id)).scalars():
                limit_of[tenant_id] = new_id("lim", epoch_ms(now))
                connection.execute(
                    insert(limits).values(
                        id=limit_of[tenant_id], tenant_id=tenant_id, name="bench",
                        spec=spec.model_dump(mode="json"), created_at=now, updated_at=now,
                    )
                )  # fmt: skip
            queued = connection.execute(select(runs.c.id, runs.c.tenant_id).order_by(runs.c.id))
            for index, (run_id, tenant_id) in enumerate(queued.all()):
                key = f"k{index if keys is None else index % keys}"
                connection.execute(
                    update(runs)
                    .where(runs.c.id == run_id)
                    .values(limit_keys=[[limit_of[tenant_id], key]])
                )

    return prepare


def compare_store() -> LimitsComparison:
    world = make_world(SEED, (0.0, 0.0))
    rate = Rate(count=1000, period_seconds=60)
    return LimitsComparison(
        measure_postgres(world),
        measure_postgres(world, keyed(LimitSpec(max_running=1), None)),
        measure_postgres(world, keyed(LimitSpec(max_running=100, rate=rate), 10)),
        measure_postgres(world, keyed(LimitSpec(max_running=5, rate=rate), 10)),
    )
