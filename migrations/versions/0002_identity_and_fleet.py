"""Managed identity (principals, hashed tokens, grants, auth audit, login attempts) and the
client-machine heartbeat table.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TSTZ = postgresql.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "cloud_principals",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("email", sa.Text),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False, server_default="member"),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.text("true")),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_principals"),
        sa.UniqueConstraint("username", name="uq_cloud_principals_username"),
        sa.UniqueConstraint("email", name="uq_cloud_principals_email"),
        sa.CheckConstraint("kind IN ('human', 'service_account')", name="ck_cloud_principals_kind"),
        sa.CheckConstraint("role IN ('admin', 'member')", name="ck_cloud_principals_role"),
    )

    op.create_table(
        "cloud_principal_tokens",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("principal_id", sa.BigInteger, nullable=False),
        sa.Column("token_prefix", sa.Text, nullable=False),
        sa.Column("token_hash", sa.LargeBinary, nullable=False),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("created_by_principal_id", sa.BigInteger),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("last_used_at", TSTZ),
        sa.Column("revoked_at", TSTZ),
        sa.Column("revoked_by_principal_id", sa.BigInteger),
        sa.Column("revocation_reason", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_principal_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_cloud_principal_tokens_token_hash"),
        sa.ForeignKeyConstraint(
            ["principal_id"],
            ["cloud_principals.id"],
            name="fk_cloud_principal_tokens_principal_id_cloud_principals",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_cloud_principal_tokens_principal_id", "cloud_principal_tokens", ["principal_id"]
    )

    op.create_table(
        "cloud_project_grants",
        sa.Column("principal_id", sa.BigInteger, nullable=False),
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("granted_by_principal_id", sa.BigInteger),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("principal_id", "project", name="pk_cloud_project_grants"),
        sa.ForeignKeyConstraint(
            ["principal_id"],
            ["cloud_principals.id"],
            name="fk_cloud_project_grants_principal_id_cloud_principals",
            ondelete="CASCADE",
        ),
    )

    op.create_table(
        "cloud_auth_audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("occurred_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("actor_principal_id", sa.BigInteger),
        sa.Column("actor_source", sa.Text, nullable=False),
        sa.Column("target_principal_id", sa.BigInteger),
        sa.Column("project", sa.Text),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("reason_code", sa.Text),
        sa.Column("metadata", postgresql.JSONB),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_auth_audit_log"),
    )
    op.create_index(
        "ix_cloud_auth_audit_log_occurred_at",
        "cloud_auth_audit_log",
        [sa.text("occurred_at DESC")],
    )

    op.create_table(
        "cloud_login_attempts",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("attempted_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("succeeded", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_login_attempts"),
    )
    op.create_index(
        "ix_cloud_login_attempts_key_attempted_at",
        "cloud_login_attempts",
        ["key", "attempted_at"],
    )

    op.create_table(
        "cloud_workers",
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("hostname", sa.Text, nullable=False),
        sa.Column("version", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "projects",
            postgresql.JSONB,
            nullable=False,
            server_default=sa.text("'[]'::jsonb"),
        ),
        sa.Column("pending", sa.Integer, nullable=False, server_default="0"),
        sa.Column("quarantined", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_push_at", TSTZ),
        sa.Column("last_pull_at", TSTZ),
        sa.Column("last_seen_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("first_seen_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("status", sa.Text, nullable=False, server_default="online"),
        sa.Column("principal_id", sa.BigInteger),
        sa.Column("principal_name", sa.Text, nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("origin", name="pk_cloud_workers"),
    )
    op.create_index("ix_cloud_workers_hostname", "cloud_workers", ["hostname"])


def downgrade() -> None:
    for table in (
        "cloud_workers",
        "cloud_login_attempts",
        "cloud_auth_audit_log",
        "cloud_project_grants",
        "cloud_principal_tokens",
        "cloud_principals",
    ):
        op.drop_table(table)
