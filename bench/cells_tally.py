"""The cells scenario's count, once its load has stopped: the schedules' fires caught up and
paused, every run ended, then each tenant's runs as the cells answer them through the edge
(listed by its key; a moved tenant's runs left in its source cell read there by id, which the
edge asks of its earlier homes) against what each tenant was told was made.

A cell's database is read only for what its API cannot say: whether every schedule has fired
up to now and every run has ended (waiting, not counting), and the ids of a moved tenant's
runs its source kept (the source answers that tenant's listing 503 once it has moved)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, create_engine, func, select

from herder.client import HerderClient
from herder.client.errors import ApiError
from herder.client.retries import Retries
from herder.domain.models import Run, RunDetail
from herder.domain.states import AttemptState, RunState
from herder.store.database import normalize_url
from herder.store.schema import runs

STEP_TIMEOUT_SECONDS = 180.0  # a cell starting, recovering, catching up or ending its runs
PATIENCE = Retries(60)  # every read and set-up call, and the mover's submissions
PAGE = 1000
UNENDED = [state.value for state in RunState if not state.is_terminal]


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"cells: {what} not seen in {STEP_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.25)


@dataclass
class Tenant:
    """A tenant of the scenario, and the runs it was told were made."""

    cell: str  # where it lived first
    tenant_id: str
    key: str
    job_id: str
    schedule_id: str | None
    acknowledged: list[str] = field(default_factory=list)


class CellDatabase:
    """One cell's database, read by the bench (never written)."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(normalize_url(url), pool_pre_ping=True)

    def __enter__(self) -> CellDatabase:
        return self

    def __exit__(self, *_: object) -> None:
        self.engine.dispose()

    def fires(self, schedule_ids: list[str]) -> dict[str, tuple[int, datetime | None]]:
        """Each schedule's runs here and its latest instant."""
        query = (
            select(runs.c.schedule_id, func.count(), func.max(runs.c.scheduled_for))
            .where(runs.c.schedule_id.in_(schedule_ids))
            .group_by(runs.c.schedule_id)
        )
        with self.engine.connect() as connection:
            return {row[0]: (row[1], row[2]) for row in connection.execute(query)}

    def unended(self) -> int:
        query = select(func.count()).select_from(runs).where(runs.c.state.in_(UNENDED))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def run_ids(self, tenant_id: str) -> list[str]:
        query = select(runs.c.id).where(runs.c.tenant_id == tenant_id)
        with self.engine.connect() as connection:
            return list(connection.execute(query).scalars())


def fired(databases: Iterable[CellDatabase], schedule_ids: list[str], times: int) -> bool:
    """Every schedule has fired ``times`` across the cells."""
    counts: Counter[str] = Counter()
    for database in databases:
        for schedule_id, (count, _) in database.fires(schedule_ids).items():
            counts[schedule_id] += count
    return all(counts[schedule_id] >= times for schedule_id in schedule_ids)


def _fired_up_to(
    databases: Iterable[CellDatabase], schedule_ids: list[str], moment: datetime
) -> bool:
    latest: dict[str, datetime] = {}
    for database in databases:
        for schedule_id, (_, last) in database.fires(schedule_ids).items():
            if last is not None:
                latest[schedule_id] = max(last, latest.get(schedule_id, last))
    return all(
        schedule_id in latest and latest[schedule_id].replace(tzinfo=UTC) >= moment
        for schedule_id in schedule_ids
    )


@dataclass(frozen=True)
class Tally:
    acknowledged: int
    lost: int  # acknowledged, not found
    keys_doubled: int  # a key that made two runs
    succeeded_twice: int  # runs with more than one succeeded attempt
    fires: int  # instants of the schedules that stayed in cell A
    fires_doubled: int  # their instants with more than one run
    fires_missed: int  # their instants, between the first and last, with none
    move_fires_in: tuple[int, int]  # the mover's fires in cell a, in cell b
    move_fires_missed: int
    move_fires_doubled: int

    @property
    def doubled(self) -> int:
        return self.keys_doubled + self.succeeded_twice + self.fires_doubled


def settle(edge: str, tenants: list[Tenant], databases: tuple[CellDatabase, CellDatabase]) -> None:
    """The fires caught up to now (those missed while a cell was down are fired once it is
    back), then every schedule paused and every run ended."""
    schedules = {t.schedule_id: t for t in tenants if t.schedule_id}
    moment = datetime.now(UTC).replace(microsecond=0)
    until(lambda: _fired_up_to(databases, list(schedules), moment), "the fires caught up")
    for schedule_id, tenant in schedules.items():
        with HerderClient(edge, tenant.key, retries=PATIENCE) as client:
            client.pause_schedule(schedule_id)
    until(lambda: sum(database.unended() for database in databases) == 0, "every run ended")


def tally(
    edge: str,
    stayed: list[Tenant],
    mover: Tenant,
    databases: tuple[CellDatabase, CellDatabase],
) -> Tally:
    """What the cells answer, counted against what each tenant was told."""
    settle(edge, [*stayed, mover], databases)
    found = {t.tenant_id: _runs_of(edge, t) for t in stayed}
    in_source = databases[0].run_ids(mover.tenant_id)
    found[mover.tenant_id] = of_mover = _runs_of(edge, mover, in_source)
    every = [run for runs_found in found.values() for run in runs_found.values()]
    fires = [_instants(found[t.tenant_id].values(), t.schedule_id) for t in stayed if t.schedule_id]
    assert mover.schedule_id is not None
    moved = _instants(of_mover.values(), mover.schedule_id)
    in_a = sum(
        1
        for run_id in in_source
        if run_id in of_mover and of_mover[run_id].schedule_id == mover.schedule_id
    )
    everyone = [*stayed, mover]
    return Tally(
        acknowledged=sum(len(t.acknowledged) for t in everyone),
        lost=sum(
            1 for t in everyone for run_id in t.acknowledged if run_id not in found[t.tenant_id]
        ),
        keys_doubled=sum(
            count - 1
            for runs_found in found.values()
            for count in Counter(
                run.idempotency_key for run in runs_found.values() if run.idempotency_key
            ).values()
        ),
        succeeded_twice=sum(1 for run in every if _succeeded_twice(run)),
        fires=sum(len(set(instants)) for instants in fires),
        fires_doubled=sum(len(instants) - len(set(instants)) for instants in fires),
        fires_missed=sum(_missed(instants) for instants in fires),
        move_fires_in=(in_a, len(moved) - in_a),
        move_fires_missed=_missed(moved),
        move_fires_doubled=len(moved) - len(set(moved)),
    )


def _runs_of(edge: str, tenant: Tenant, earlier: Iterable[str] = ()) -> dict[str, Run]:
    """The tenant's runs its cell lists through the edge, those ``earlier`` names (its
    source's, after a move) read by id there, and any acknowledged one not listed, read by
    id: a run not found so is lost. A run tried more than once is read by id for its
    attempts (only it can have succeeded twice)."""
    with HerderClient(edge, tenant.key, retries=PATIENCE) as client:
        found: dict[str, Run] = {}
        cursor = None
        while True:
            page = client.list_runs(limit=PAGE, cursor=cursor)
            found |= {run.id: run for run in page.items}
            if (cursor := page.next_cursor) is None:
                break
        for run_id in [*earlier, *tenant.acknowledged]:
            if run_id not in found:
                try:
                    found[run_id] = client.get_run(run_id)
                except ApiError as error:
                    if error.status != 404:
                        raise
        tried_again = [run.id for run in found.values() if run.attempt_count > 1]
        found |= {run_id: client.get_run(run_id) for run_id in tried_again}  # its attempts
    return found


def _succeeded_twice(run: Run) -> bool:
    return isinstance(run, RunDetail) and (
        sum(1 for one in run.attempts if one.state is AttemptState.SUCCEEDED) > 1
    )


def _instants(found: Iterable[Run], schedule_id: str) -> list[datetime]:
    return sorted(
        run.scheduled_for for run in found if run.schedule_id == schedule_id and run.scheduled_for
    )


def _missed(instants: list[datetime]) -> int:
    """Instants between the first and the last with no run (one a second)."""
    if not instants:
        return 0
    span = int((instants[-1] - instants[0]).total_seconds()) + 1
    every = {instants[0] + timedelta(seconds=n) for n in range(span)}
    return len(every - set(instants))
