"""alert channels' signing secrets sealed with the server's keyring

A migration does not hold the server's key, so it cannot seal: the plain secret moves to
``plain_secret`` (nullable) beside the sealed columns, and the first server or scheduler with
a keyring to start seals it and clears the column (``ChannelSecrets.seal_plain``).

Not online: alert_channels.secret is renamed, which older servers read by its old name.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("alert_channels", schema=None) as batch_op:
        batch_op.alter_column(
            "secret",
            new_column_name="plain_secret",
            existing_type=sa.String(length=128),
            nullable=True,
        )
        batch_op.add_column(sa.Column("key_id", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("nonce", sa.LargeBinary(), nullable=True))
        batch_op.add_column(sa.Column("ciphertext", sa.LargeBinary(), nullable=True))
        batch_op.create_index(batch_op.f("ix_alert_channels_key_id"), ["key_id"], unique=False)


def downgrade() -> None:
    sealed = op.get_bind().execute(
        sa.text("SELECT count(*) FROM alert_channels WHERE plain_secret IS NULL")
    )
    if sealed.scalar_one():
        raise NotImplementedError(
            "sealed channel secrets are not turned back into plain text; restore a backup"
        )
    with op.batch_alter_table("alert_channels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_alert_channels_key_id"))
        batch_op.drop_column("ciphertext")
        batch_op.drop_column("nonce")
        batch_op.drop_column("key_id")
        batch_op.alter_column(
            "plain_secret",
            new_column_name="secret",
            existing_type=sa.String(length=128),
            nullable=False,
        )
