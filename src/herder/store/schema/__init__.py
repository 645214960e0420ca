"""The tables (docs/design.md §2). Migrations under ``migrations/`` create them; this package
is what the repositories query against and what Alembic compares with to generate new
revisions.
The alerts' tables are in ``alerts``; the metadata they all share is in ``base``."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from herder.store.schema.alerts import alert_channels as alert_channels
from herder.store.schema.alerts import alert_deliveries as alert_deliveries
from herder.store.schema.alerts import alert_incidents as alert_incidents
from herder.store.schema.alerts import alert_rules as alert_rules
from herder.store.schema.alerts import job_notices as job_notices
from herder.store.schema.alerts import limit_notices as limit_notices
from herder.store.schema.audit import audit_log as audit_log
from herder.store.schema.base import ID as ID
from herder.store.schema.base import (
    deadline_index,
    ended_index,
    missed_index,
    owned_columns,
    serial_column,
    stamp_columns,
    version_column,
)
from herder.store.schema.base import metadata as metadata
from herder.store.schema.checkpoints import checkpoint_chunks as checkpoint_chunks
from herder.store.schema.checkpoints import checkpoint_contents as checkpoint_contents
from herder.store.schema.checkpoints import checkpoints as checkpoints
from herder.store.schema.compatibility import schema_compatibility as schema_compatibility
from herder.store.schema.events import events as events
from herder.store.schema.events import hook_deliveries as hook_deliveries
from herder.store.schema.events import hooks as hooks
from herder.store.schema.events import run_waits as run_waits
from herder.store.schema.events import triggers as triggers
from herder.store.schema.limits import limit_last_starts as limit_last_starts
from herder.store.schema.limits import limit_starts as limit_starts
from herder.store.schema.limits import limits as limits
from herder.store.schema.limits import run_limit_keys as run_limit_keys
from herder.store.schema.limits import submit_buckets as submit_buckets
from herder.store.schema.logs import attempt_logs as attempt_logs
from herder.store.schema.placement_settings import placement_settings as placement_settings
from herder.store.schema.pools import pool_shares as pool_shares
from herder.store.schema.pools import pools as pools
from herder.store.schema.secrets import secrets as secrets
from herder.store.schema.usage import tenant_budgets as tenant_budgets
from herder.store.schema.usage import usage_charges as usage_charges
from herder.store.schema.users import sessions as sessions
from herder.store.schema.users import users as users
from herder.store.types import AutoIncrementId, JsonColumn, UtcDateTime

tenants = Table(
    "tenants",
    metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("weight", Integer, nullable=False, server_default="1"),
    Column("is_system", Boolean, nullable=False, server_default="0"),
    Column("quotas", JsonColumn, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("retention_days", Integer, nullable=False, server_default="1825"),  # its history
    Column("default_pool", String(64)),  # a pool's name: where its runs naming none go
    # a move between cells (domain.moves.MoveState; NULL: at home) and the other cell
    Column("move_state", String(16)),
    Column("move_cell", String(63)),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False, index=True),
    Column("name", String(128), nullable=False),
    Column("role", String(16), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),
    Column("expires_at", UtcDateTime),
    Column("last_used_at", UtcDateTime),  # written at most once a minute per key
)

worker_tokens = Table(
    "worker_tokens",
    metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(128), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),
)

# Artifacts' bytes uploaded before revision 0033, kept until ``herder system move-artifacts``
# moves them to the blob store (``store/artifacts.py``); nothing new is written here.
blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

artifacts = Table(
    "artifacts",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("media_type", String(128), nullable=False),
    Column("filename", String(255), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # domain.artifacts.ArtifactLocation: ``blobs`` (the default an older server writes), or
    # the blob store under ``artifacts/<tenant>/<sha256>``
    Column("location", String(16), nullable=False, server_default="database"),
    Index(None, "sha256"),  # whether a row still keeps a digest's bytes in ``blobs``
)

jobs = Table(
    "jobs",
    metadata,
    *owned_columns(128),
    Column("spec", JsonColumn, nullable=False),
    *stamp_columns(),
    version_column(),
    Column("created_by", String(128)),  # who made it (domain.actors; 0037): NULL before
    UniqueConstraint("tenant_id", "name"),
    Index(None, "tenant_id", "id"),
)

job_labels = Table(
    "job_labels",
    metadata,
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
    # the job's tenant, so that a tenant's label filter reads only its own labels (0035);
    # nullable while the release before may run: it leaves it out, and 0035's trigger fills it
    Column("tenant_id", ID),
    Index(None, "tenant_id", "key", "value"),
)


runs = Table(
    "runs",
    metadata,
    *owned_columns(),
    Column("job_id", ID, nullable=False),  # no FK: history outlives a deleted job
    Column("job_name", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("spec", JsonColumn, nullable=False),
    Column("cpu_milli", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("artifact", String(64)),
    Column("idempotency_key", String(255)),
    Column("schedule_id", ID),
    Column("scheduled_for", UtcDateTime),
    Column("attempt_count", Integer, nullable=False, server_default="0"),
    Column("cancel_requested", Boolean, nullable=False, server_default="0"),
    # its workers are stopping it for a suspend: held ``suspended`` when they report
    Column("suspend_requested", Boolean, nullable=False, server_default="0"),
    Column("suspensions", Integer, nullable=False, server_default="0"),  # not retries
    Column("created_at", UtcDateTime, nullable=False),
    Column("queued_at", UtcDateTime),
    Column("started_at", UtcDateTime),
    Column("finished_at", UtcDateTime),
    Column("exit_code", Integer),
    Column("reason", Text),
    Column("retry_at", UtcDateTime),  # when a retry_wait run is queued again
    Column("start_deadline", UtcDateTime),  # a queued run not started by then expires
    Column("rerun_of", ID),  # the run this one re-runs
    Column("replicas", Integer, nullable=False, server_default="1"),  # a gang when > 1
    Column("requires", JsonColumn),  # labels a worker must have
    Column("pool", String(64)),  # the pool it names (its job's or its own); None: the default
    Column("preemptible", Boolean, nullable=False, server_default="0"),
    Column("preemptions", Integer, nullable=False, server_default="0"),  # not retries
    Column("preempted_at", UtcDateTime),  # the cool-down against preemption loops
    Column("waiting_reason", Text),  # why a queued run is not placed yet, from the dispatcher
    # A workflow task's run: which task (and map instance, -1 when not mapped), in which
    # repair of its workflow run; what its upstream tasks passed it and what it wrote.
    Column("workflow_run_id", ID),
    Column("task_name", String(128)),
    Column("map_index", Integer),
    Column("repair", Integer),
    Column("map_item", JsonColumn),
    Column("inputs", JsonColumn),
    Column("output", JsonColumn),  # the JSON the job wrote to $HERDER_OUTPUT (≤ 64 KiB)
    Column("backfill_id", ID),  # the backfill that asked for it
    Column("run_at", UtcDateTime),  # a ``scheduled`` (delayed) run is queued then
    # [[limit id, key], ...]: the limits it counts against, keys rendered at submit
    Column("limit_keys", JsonColumn),
    Column("deadline_at", UtcDateTime),  # finished by then, or its deadline is missed
    Column("deadline_missed_at", UtcDateTime),  # when the reaper found it missed (once)
    Column("created_by", String(128)),  # who made it (domain.actors; 0037): NULL before
    UniqueConstraint("tenant_id", "idempotency_key"),
    UniqueConstraint("schedule_id", "scheduled_for"),
    # a task instance runs once per repair, whoever decides it
    Index(None, "workflow_run_id", "task_name", "map_index", "repair", unique=True),
    Index(None, "tenant_id", "id"),
    Index(None, "tenant_id", "job_id", "id"),
    Index(None, "tenant_id", "state", "id"),
    Index(None, "state", "retry_at"),
    Index(None, "state", "start_deadline"),
    Index(None, "state", "run_at"),
)
# The claim orders by priority DESC, queued_at: the index matches it column for column,
# direction included (docs/design.md §9).
Index("ix_runs_claim_order", runs.c.state, runs.c.priority.desc(), runs.c.queued_at)
# The overview's "ended in the last hour".
ended_index("ix_runs_tenant_id_finished_at", runs, "tenant_id", "finished_at")
deadline_index("ix_runs_deadline_at", runs)
missed_index("ix_runs_tenant_id_deadline_missed_at", runs)
# Alerts read a job's last ended runs in end order, however long its history.
ended_index("ix_runs_tenant_id_job_id_finished_at", runs, "tenant_id", "job_id", "finished_at")

attempts = Table(
    "attempts",
    metadata,
    Column("id", ID, primary_key=True),
    Column("run_id", ID, ForeignKey("runs.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("worker_id", ID, nullable=False),
    Column("state", String(16), nullable=False),
    Column("cpu_milli", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("exit_code", Integer),
    Column("reason", Text),
    Column("started_at", UtcDateTime, nullable=False),
    Column("deadline_at", UtcDateTime),  # the reaper times the attempt out after this
    Column("finished_at", UtcDateTime),
    Column("cpu_user_seconds", Float),
    Column("cpu_system_seconds", Float),
    Column("max_rss_kb", Integer),
    Column("log_bytes", Integer, nullable=False, server_default="0"),
    Column("log_truncated", Boolean, nullable=False, server_default="0"),
    Column("rank", Integer, nullable=False, server_default="0"),  # gang member, 0 alone
    Column("gpu_indices", JsonColumn),  # the worker's GPUs this attempt was given
    Column("delivered_at", UtcDateTime),  # handed to the worker by a claim
    Column("preempt_requested_at", UtcDateTime),  # the dispatcher chose it as a victim
    Column("stopped_by", String(8)),  # sigterm | sigkill: how a stop by its worker ended it
    Column("checkpoint_refused", Text),  # why its checkpoint was not saved at its end
    # placed past its tenant's nominal share of its worker's pool: reclaimable
    Column("borrowed", Boolean, nullable=False, server_default="0"),
    Column("preempt_reason", Text),  # why the dispatcher stops it (domain.placement.timeline)
    UniqueConstraint("run_id", "number", "rank"),
    Index(None, "worker_id", "state"),
    Index(None, "state", "deadline_at"),
)

run_events = Table(
    "run_events",
    metadata,
    serial_column(),
    Column("run_id", ID, ForeignKey("runs.id"), nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("from_state", String(16)),
    Column("to_state", String(16)),
    Column("attempt", Integer),
    Column("actor", String(128), nullable=False),
    Column("message", Text, nullable=False),
    Index(None, "run_id", "id"),
)

log_chunks = Table(
    "log_chunks",
    metadata,
    serial_column(),
    Column("attempt_id", ID, ForeignKey("attempts.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("stream", String(8), nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    UniqueConstraint("attempt_id", "seq"),
)

workers = Table(
    "workers",
    metadata,
    Column("id", ID, primary_key=True),
    Column("token_id", ID, ForeignKey("worker_tokens.id"), nullable=False),
    # the hash of the secret handed out at registration; every later call presents it
    Column("secret_hash", String(64), nullable=True),
    Column("name", String(255), nullable=False),
    Column("state", String(16), nullable=False),
    Column("cpu_milli", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("max_slots", Integer, nullable=False),
    Column("labels", JsonColumn, nullable=False),
    Column("address", String(255), nullable=False, server_default=""),  # for gang peers
    Column("version", String(64), nullable=False),
    Column("registered_at", UtcDateTime, nullable=False),
    Column("last_heartbeat_at", UtcDateTime, nullable=False),
    Index(None, "state", "last_heartbeat_at"),
)

schedules = Table(
    "schedules",
    metadata,
    *owned_columns(),
    Column("name", String(128)),  # optional; unique per tenant when given (herder apply's key)
    Column("job_id", ID),  # what it starts: a job's run,
    Column("workflow_id", ID),  # or a workflow's
    Column("spec", JsonColumn, nullable=False),
    Column("paused", Boolean, nullable=False, server_default="0"),
    Column("partition", Integer, nullable=False),
    Column("next_fire_at", UtcDateTime),  # nominal: the cron time; NULL when paused or ended
    Column("next_due_at", UtcDateTime),  # when to fire it: nominal + the schedule's jitter
    Column("last_fired_for", UtcDateTime),
    Column("fired_count", Integer, nullable=False, server_default="0"),
    Column("missed_count", Integer, nullable=False, server_default="0"),
    Column("skipped_count", Integer, nullable=False, server_default="0"),
    *stamp_columns(),
    Column("created_by", String(128)),  # who made it (domain.actors; 0037): NULL before
    Index(None, "tenant_id", "id"),
    Index(None, "tenant_id", "name", unique=True),
    Index(None, "partition", "next_due_at"),  # the firer's "what is due" query
)

schedule_events = Table(
    "schedule_events",
    metadata,
    serial_column(),
    Column("schedule_id", ID, ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("kind", String(16), nullable=False),  # fired, missed, skipped, replaced, paused, …
    Column("scheduled_for", UtcDateTime),
    Column("run_id", ID),
    Column("message", Text, nullable=False),
    Index(None, "schedule_id", "id"),
)

workflows = Table(
    "workflows",
    metadata,
    *owned_columns(128),
    Column("version", Integer, nullable=False),  # the current one; every change adds one
    Column("spec", JsonColumn, nullable=False),
    *stamp_columns(),
    Column("created_by", String(128)),  # who made it (domain.actors; 0037): NULL before
    UniqueConstraint("tenant_id", "name"),
    Index(None, "tenant_id", "id"),
)

# Every version a workflow had: a workflow run pins the one it started with. No foreign key:
# history outlives a deleted workflow.
workflow_versions = Table(
    "workflow_versions",
    metadata,
    Column("workflow_id", ID, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("spec", JsonColumn, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

workflow_runs = Table(
    "workflow_runs",
    metadata,
    *owned_columns(),
    Column("workflow_id", ID, nullable=False),
    Column("workflow_name", String(128), nullable=False),
    Column("version", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("params", JsonColumn, nullable=False),
    Column("jobs", JsonColumn, nullable=False),  # the jobs it runs as they were at its start
    Column("idempotency_key", String(255)),
    Column("schedule_id", ID),
    Column("scheduled_for", UtcDateTime),
    Column("backfill_id", ID),  # the backfill that asked for it
    # the latest-repair token: a repair names the number it saw, and adds one
    Column("repair", Integer, nullable=False, server_default="0"),
    Column("repaired_tasks", JsonColumn),  # the tasks the latest repair runs again
    Column("cancel_requested", Boolean, nullable=False, server_default="0"),
    Column("reason", Text),
    Column("created_at", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime),
    Column("finished_at", UtcDateTime),
    Column("deadline", JsonColumn),  # the deadline it runs under: its schedule's or workflow's
    Column("deadline_at", UtcDateTime),
    Column("deadline_missed_at", UtcDateTime),
    Column("created_by", String(128)),  # who made it (domain.actors; 0037): NULL before
    UniqueConstraint("tenant_id", "idempotency_key"),
    UniqueConstraint("schedule_id", "scheduled_for"),
    Index(None, "tenant_id", "id"),
    Index(None, "tenant_id", "workflow_id", "id"),
    Index(None, "workflow_id", "state", "id"),
)
# Alerts read the workflow runs that ended since their watermark, in end order.
ended_index("ix_workflow_runs_tenant_id_finished_at", workflow_runs, "tenant_id", "finished_at")
deadline_index("ix_workflow_runs_deadline_at", workflow_runs)
missed_index("ix_workflow_runs_tenant_id_deadline_missed_at", workflow_runs)

# A schedule's nominal times over a past range, run a few at a time: the next start when one
# of its runs ends. ``cursor`` is the last nominal time it has started (or found run).
backfills = Table(
    "backfills",
    metadata,
    *owned_columns(),
    Column("schedule_id", ID, nullable=False),
    Column("start", UtcDateTime, nullable=False),
    Column("end", UtcDateTime, nullable=False),
    Column("max_active", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("cursor", UtcDateTime),
    Column("started", Integer, nullable=False, server_default="0"),
    Column("already_run", Integer, nullable=False, server_default="0"),
    Column("created_at", UtcDateTime, nullable=False),
    Column("finished_at", UtcDateTime),
    Index(None, "tenant_id", "id"),
    Index(None, "schedule_id", "id"),
)

leases = Table(
    "leases",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("fencing", AutoIncrementId, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
)
