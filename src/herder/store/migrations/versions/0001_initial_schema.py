"""initial schema

Online: new tables only.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herder.store.types

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_blobs")),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("fencing", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("expires_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weight", sa.Integer(), server_default="1", nullable=False),
        sa.Column("is_system", sa.Boolean(), server_default="0", nullable=False),
        sa.Column(
            "quotas",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "worker_tokens",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_tokens")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_keys_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "artifacts",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("media_type", sa.String(length=128), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sha256"], ["blobs.sha256"], name=op.f("fk_artifacts_sha256_blobs")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_artifacts_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "sha256", name=op.f("pk_artifacts")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_jobs_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_jobs_tenant_id_name")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_tenant_id_id"), ["tenant_id", "id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("job_name", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("cpu_milli", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("artifact", sa.String(length=64), nullable=True),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("schedule_id", sa.String(length=40), nullable=True),
        sa.Column("scheduled_for", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("attempt_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("queued_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("started_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_runs_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint(
            "schedule_id", "scheduled_for", name=op.f("uq_runs_schedule_id_scheduled_for")
        ),
        sa.UniqueConstraint(
            "tenant_id", "idempotency_key", name=op.f("uq_runs_tenant_id_idempotency_key")
        ),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_claim_order",
            ["state", sa.literal_column("priority DESC"), "queued_at"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_runs_tenant_id_id"), ["tenant_id", "id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_runs_tenant_id_job_id_id"), ["tenant_id", "job_id", "id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_runs_tenant_id_state_id"), ["tenant_id", "state", "id"], unique=False
        )

    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("token_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("cpu_milli", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("max_slots", sa.Integer(), nullable=False),
        sa.Column(
            "labels",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("registered_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column(
            "last_heartbeat_at", herder.store.types.UtcDateTime(timezone=True), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["token_id"], ["worker_tokens.id"], name=op.f("fk_workers_token_id_worker_tokens")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=40), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("cpu_milli", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("cpu_user_seconds", sa.Float(), nullable=True),
        sa.Column("cpu_system_seconds", sa.Float(), nullable=True),
        sa.Column("max_rss_kb", sa.Integer(), nullable=True),
        sa.Column("log_bytes", sa.Integer(), server_default="0", nullable=False),
        sa.Column("log_truncated", sa.Boolean(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_attempts_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("run_id", "number", name=op.f("uq_attempts_run_id_number")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_attempts_worker_id_state"), ["worker_id", "state"], unique=False
        )

    op.create_table(
        "job_labels",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_labels_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "key", name=op.f("pk_job_labels")),
    )
    with op.batch_alter_table("job_labels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_labels_key_value"), ["key", "value"], unique=False)

    op.create_table(
        "run_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_events_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_events")),
    )
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_events_run_id_id"), ["run_id", "id"], unique=False)

    op.create_table(
        "log_chunks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("attempt_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("stream", sa.String(length=8), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempts.id"], name=op.f("fk_log_chunks_attempt_id_attempts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_chunks")),
        sa.UniqueConstraint("attempt_id", "seq", name=op.f("uq_log_chunks_attempt_id_seq")),
    )


def downgrade() -> None:
    op.drop_table("log_chunks")
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_events_run_id_id"))

    op.drop_table("run_events")
    with op.batch_alter_table("job_labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_labels_key_value"))

    op.drop_table("job_labels")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attempts_worker_id_state"))

    op.drop_table("attempts")
    op.drop_table("workers")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_tenant_id_state_id"))
        batch_op.drop_index(batch_op.f("ix_runs_tenant_id_job_id_id"))
        batch_op.drop_index(batch_op.f("ix_runs_tenant_id_id"))
        batch_op.drop_index("ix_runs_claim_order")

    op.drop_table("runs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_tenant_id_id"))

    op.drop_table("jobs")
    op.drop_table("artifacts")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_tenant_id"))

    op.drop_table("api_keys")
    op.drop_table("worker_tokens")
    op.drop_table("tenants")
    op.drop_table("leases")
    op.drop_table("blobs")
