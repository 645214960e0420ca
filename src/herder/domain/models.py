"""The records the store hands out and the API shows: plain typed data, no behaviour."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, computed_field

from herder.domain.actors import user_actor
from herder.domain.history import DEFAULT_RETENTION_DAYS
from herder.domain.jobs import Capacity, JobSpec, Priority
from herder.domain.moves import MoveState
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import AttemptState, RunState, StoppedBy
from herder.domain.tenants import TenantQuotas


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


GpuIndices = Annotated[list[int], BeforeValidator(lambda value: value or [])]  # NULL: none


class Role(StrEnum):
    """Roles nest: an admin may do all a developer may, a developer all an operator may, an
    operator all a viewer may (docs/tenants.md)."""

    ADMIN = "admin"
    DEVELOPER = "developer"
    OPERATOR = "operator"
    VIEWER = "viewer"

    def includes(self, other: Role) -> bool:
        return _ROLE_RANK[self] >= _ROLE_RANK[other]

    @property
    def may_write(self) -> bool:
        """May change definitions: jobs, schedules, workflows, artifacts, alerts, secrets."""
        return self.includes(Role.DEVELOPER)

    @property
    def may_operate(self) -> bool:
        """May start, cancel, re-run and repair runs, backfill, pause, resume and fire schedules."""
        return self.includes(Role.OPERATOR)


_ROLE_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.DEVELOPER: 2, Role.ADMIN: 3}


class Tenant(_Record):
    id: str
    name: str
    weight: int
    is_system: bool
    created_at: datetime
    quotas: TenantQuotas = TenantQuotas()
    retention_days: int = DEFAULT_RETENTION_DAYS  # its runs older than this are gone
    default_pool: str | None = None  # where its runs that name no pool go (docs/pools.md)
    move_state: MoveState | None = Field(
        default=None,
        description="its move between cells (docs/cells.md): frozen or arriving while it "
        "moves (its writes refused), moved once it lives in move_cell (its history stays here)",
    )
    move_cell: str | None = Field(
        default=None, description="the cell it moves to (frozen, moved) or from (arriving)"
    )


class Principal(_Record):
    """Who is calling: the tenant every query is scoped to, and what they may do."""

    tenant_id: str
    role: Role
    key_id: str
    is_system: bool
    key_name: str = ""
    # a person signed in through OpenID Connect (docs/tenants.md), else None: the key's alone
    user_id: str | None = None
    user_name: str = ""  # the provider's preferred_username, else the email
    email: str = ""  # the provider's verified email, where it gave one
    # its tenant's move between cells, if moving, and the other cell: for the refusal the
    # key's requests get meanwhile (``api.auth``), never shown
    move_state: MoveState | None = Field(default=None, exclude=True)
    move_cell: str | None = Field(default=None, exclude=True)

    @property
    def actor(self) -> str:
        """Who a run's events name as having done what this caller does."""
        return user_actor(self.user_id or self.key_id)


class ApiKey(_Record):
    """A key as listed: never its secret nor the secret's hash."""

    id: str
    tenant_id: str
    name: str
    role: Role
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None  # to about a minute (docs/tenants.md)
    revoked_at: datetime | None = None


class Artifact(_Record):
    id: str  # sha256 of the bytes
    size: int
    media_type: str
    filename: str
    created_at: datetime


class Job(_Record):
    id: str
    name: str
    spec: JobSpec
    created_at: datetime
    updated_at: datetime
    version: int  # 1 when created, one more on every change (the API's ETag)
    # who made it (``domain.actors``: ``user:key_…``, ``schedule:sch_…``), None when made
    # before it was recorded; and a person's name for it, added as it is read
    created_by: str | None = None
    created_by_name: str | None = None


class Attempt(_Record):
    id: str
    run_id: str
    number: int
    worker_id: str
    state: AttemptState
    exit_code: int | None
    reason: str | None
    started_at: datetime
    deadline_at: datetime | None = None
    finished_at: datetime | None
    cpu_user_seconds: float | None
    cpu_system_seconds: float | None
    max_rss_kb: int | None
    log_bytes: int
    log_truncated: bool
    rank: int = 0  # the gang member; 0 for a single run
    gpu_indices: GpuIndices = []
    # Stopped by its worker (timeout, cancel, preemption): it exited within its stop grace
    # after SIGTERM, or needed SIGKILL. None when it ended by itself or was never stopped.
    stopped_by: StoppedBy | None = None
    # Why its checkpoint directory was not saved at its end (docs/checkpoints.md); the run
    # kept its previous checkpoint. None when it was saved, or there was nothing to save.
    checkpoint_refused: str | None = None
    # Placed past its tenant's nominal share of its pool (docs/pools.md): while it runs, a
    # tenant taking its share back may preempt it.
    borrowed: bool = False
    worker_name: str | None = None  # added as the run is read; None once the worker is forgotten


class RunEvent(_Record):
    at: datetime
    from_state: RunState | None
    to_state: RunState | None
    attempt: int | None
    actor: str
    message: str
    # A person's actor (``user:key_…``) as the key's name and role, "ci (developer)", or a
    # worker's (``worker:wrk_…``) as its name, added as the event is read (``domain.actors``);
    # None for the system's other actors and for a worker since forgotten.
    actor_name: str | None = None


class Run(_Record):
    id: str
    job_id: str
    job_name: str
    state: RunState
    spec: JobSpec
    idempotency_key: str | None
    attempt_count: int
    cancel_requested: bool
    created_at: datetime
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    reason: str | None
    retry_at: datetime | None = None  # when a retry_wait run is queued again
    start_deadline: datetime | None = None
    run_at: datetime | None = None  # not started before: a debounce's window closes then
    rerun_of: str | None = None
    preemptions: int = 0  # attempts stopped by preemption; they use up no retry
    suspend_requested: bool = False  # its workers are stopping it: suspended when they report
    suspensions: int = 0  # attempts stopped by a suspend; they use up no retry either
    waiting_reason: str | None = None  # why a queued run is not placed yet
    workflow_run_id: str | None = None  # set when the run is a workflow's task
    task_name: str | None = None
    map_index: int | None = None  # -1 for a task not mapped over a list
    pool: str | None = None  # the pool it names (its own or its job's); None: the default
    deadline_at: datetime | None = None  # finished by then (its spec's ``deadline``)
    deadline_missed_at: datetime | None = None  # when it was found unfinished past it
    schedule_id: str | None = None  # the schedule whose fire started it
    scheduled_for: datetime | None = None  # that fire's nominal (cron) time
    # who made it (``domain.actors``: ``user:key_…``, ``schedule:sch_…``), None when made
    # before it was recorded; and a person's name for it, added as it is read
    created_by: str | None = None
    created_by_name: str | None = None


class CheckpointInfo(_Record):
    """A run's last saved checkpoint, as its tenant sees it (GET /v1/runs/{id}/checkpoint)."""

    run_id: str
    attempt: int  # the attempt that saved it
    sha256: str
    stored_bytes: int  # compressed, as stored
    saved_at: datetime
    expires_at: datetime | None = None  # kept after its run ended (checkpoint_keep_days)


class RunDetail(Run):
    attempts: list[Attempt]
    events: list[RunEvent]
    output: JsonValue = None  # what its job wrote to $HERDER_OUTPUT, kept once it succeeded
    checkpoint: CheckpointInfo | None = None  # its last saved checkpoint, while it is kept

    @computed_field  # type: ignore[prop-decorator]
    @property
    def borrowed(self) -> bool:
        """Whether it runs on borrowed room now (its current attempt is borrowed), so it
        may be reclaimed."""
        return self.state is RunState.RUNNING and any(
            attempt.borrowed for attempt in self.attempts if attempt.number == self.attempt_count
        )


class WorkerState(StrEnum):
    ALIVE = "alive"
    DRAINING = "draining"
    LOST = "lost"


class WorkerUse(_Record):
    """What a worker's running attempts hold: slots and the resources their runs asked for."""

    slots: int
    cpu: float
    memory_mb: int
    gpus: int


class Worker(_Record):
    id: str
    name: str
    state: WorkerState
    capacity: Capacity
    max_slots: int
    labels: dict[str, str]
    version: str
    registered_at: datetime
    address: str = ""  # where gang peers reach it
    last_heartbeat_at: datetime
    in_use: WorkerUse | None = None  # counted for the fleet listing (GET /v1/workers)


class AssignedTask(_Record):
    """Which workflow task an assigned run is, and what its upstream tasks passed it."""

    workflow_run_id: str  # HERDER_WORKFLOW_RUN_ID
    task_name: str  # HERDER_TASK
    map_index: int = -1  # HERDER_MAP_INDEX, when mapped over a list (>= 0)
    map_item: JsonValue = None  # HERDER_MAP_ITEM, when mapped: its item of the list
    inputs: dict[str, JsonValue] = {}  # the file at HERDER_INPUTS: by upstream task name


class CheckpointRef(_Record):
    """The run's last saved checkpoint, which its next attempt restores before it starts
    (docs/checkpoints.md): fetched by the worker holding the attempt, by its sha256."""

    sha256: str  # of the stored bytes: a gzip'd tar of the checkpoint directory
    stored_bytes: int
    attempt: int  # the attempt that saved it


class Assignment(_Record):
    """One attempt handed to a worker: everything it needs to run it."""

    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)  # secret_env, below

    attempt_id: str
    attempt: int  # the fencing token every later report must carry
    run_id: str
    tenant_id: str
    idempotency_key: str | None
    spec: JobSpec
    gpu_indices: list[int] = []  # CUDA_VISIBLE_DEVICES
    rank: int = 0  # HERDER_RANK: this member of a gang
    world_size: int = 1  # HERDER_WORLD_SIZE: members in the gang
    peers: list[str] = []  # HERDER_PEERS: every member's worker address, by rank
    task: AssignedTask | None = None  # set when the run is a workflow's task
    checkpoint: CheckpointRef | None = None  # restore this first; never set on attempt 1
    # The values of the secrets its spec names, by environment variable: opened at the claim,
    # sent in its answer only, put in the attempt's environment only; never in a repr.
    secret_env: dict[str, str] = Field(default={}, repr=False)


class QueueEntry(_Record):
    """One queued run: what it needs and how long and why it has waited."""

    run_id: str
    tenant_id: str
    tenant_name: str
    job_id: str
    job_name: str
    priority: Priority
    resources: Capacity  # per member of a gang
    replicas: int
    requires: dict[str, str]
    queued_at: datetime
    waited_seconds: float
    waiting_reason: str | None


class LogChunk(_Record):
    attempt: int
    seq: int
    stream: str
    text: str
    at: datetime


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None


class Schedule(_Record):
    id: str
    name: str | None = None  # unique per tenant when given: how ``herder apply`` finds it
    job_id: str | None  # what it starts: a job's run,
    workflow_id: str | None = None  # or a workflow's
    spec: ScheduleSpec
    paused: bool
    next_fire_at: datetime | None  # the next nominal (cron) time; None when paused or ended
    next_due_at: datetime | None  # when it will fire: next_fire_at plus the schedule's jitter
    last_fired_for: datetime | None
    fired_count: int
    missed_count: int
    skipped_count: int
    created_at: datetime
    updated_at: datetime
    # who made it (``domain.actors``: ``user:key_…``, ``schedule:sch_…``), None when made
    # before it was recorded; and a person's name for it, added as it is read
    created_by: str | None = None
    created_by_name: str | None = None


class TriggeredFire(_Record):
    """A fire asked for by hand (``POST /v1/schedules/{id}/trigger``): the run it started,
    a job's or a workflow's, for ``scheduled_for`` (the moment it was asked for)."""

    schedule_id: str
    scheduled_for: datetime
    run_id: str | None = None
    workflow_run_id: str | None = None


class ScheduleEvent(_Record):
    at: datetime
    kind: str
    scheduled_for: datetime | None
    run_id: str | None
    message: str
