"""Sync log, chunks, read model with full-text search, project controls and the sync audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TSTZ = postgresql.TIMESTAMP(timezone=True)


def _weighted(*parts: tuple[str, str, int]) -> str:
    return " || ".join(
        f"setweight(to_tsvector('english'::regconfig, left(coalesce({col}, ''), {n})), '{w}')"
        for col, w, n in parts
    )


def upgrade() -> None:
    op.create_table(
        "cloud_mutations",
        sa.Column("seq", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("mid", sa.Text, nullable=False),
        sa.Column("record_hash", sa.LargeBinary, nullable=False),
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("entity", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("op", sa.Text, nullable=False),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False, server_default=""),
        sa.Column("principal_id", sa.BigInteger),
        sa.Column("source", sa.Text, nullable=False, server_default="mutation_push"),
        sa.Column("received_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("seq", name="pk_cloud_mutations"),
        sa.UniqueConstraint("mid", name="uq_cloud_mutations_mid"),
    )
    op.create_index("ix_cloud_mutations_project_seq", "cloud_mutations", ["project", "seq"])

    op.create_table(
        "cloud_chunks",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("chunk_id", sa.Text, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("client_created_at", TSTZ),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("sessions_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("observations_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("prompts_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("mutations_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("principal_id", sa.BigInteger),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_chunks"),
        sa.UniqueConstraint("project", "chunk_id", name="uq_cloud_chunks_project_chunk_id"),
    )

    op.create_table(
        "cloud_sessions",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("directory", sa.Text, nullable=False, server_default=""),
        sa.Column("started_at", sa.Text, nullable=False),
        sa.Column("ended_at", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("contributor", sa.Text, nullable=False, server_default=""),
        sa.Column("applied_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("project", "id", name="pk_cloud_sessions"),
    )
    op.create_index(
        "ix_cloud_sessions_project_started_at", "cloud_sessions", ["project", "started_at"]
    )

    op.create_table(
        "cloud_observations",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("sync_id", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("tool_name", sa.Text),
        sa.Column("scope", sa.Text, nullable=False, server_default="project"),
        sa.Column("topic_key", sa.Text),
        sa.Column("revision_count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("duplicate_count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("last_seen_at", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.Column("deleted_at", sa.Text),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("contributor", sa.Text, nullable=False, server_default=""),
        sa.Column("applied_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column(
            "search",
            postgresql.TSVECTOR,
            sa.Computed(
                _weighted(
                    ("title", "A", 10_000),
                    ("content", "B", 100_000),
                    ("topic_key", "C", 1_000),
                    ("type", "C", 200),
                    ("tool_name", "D", 1_000),
                ),
                persisted=True,
            ),
        ),
        sa.PrimaryKeyConstraint("project", "sync_id", name="pk_cloud_observations"),
    )
    op.create_index(
        "ix_cloud_observations_project_created_at",
        "cloud_observations",
        ["project", "created_at"],
    )
    op.create_index(
        "ix_cloud_observations_project_session_id",
        "cloud_observations",
        ["project", "session_id"],
    )
    op.create_index(
        "ix_cloud_observations_search", "cloud_observations", ["search"], postgresql_using="gin"
    )

    op.create_table(
        "cloud_prompts",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("sync_id", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("contributor", sa.Text, nullable=False, server_default=""),
        sa.Column("applied_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column(
            "search",
            postgresql.TSVECTOR,
            sa.Computed(_weighted(("content", "A", 100_000)), persisted=True),
        ),
        sa.PrimaryKeyConstraint("project", "sync_id", name="pk_cloud_prompts"),
    )
    op.create_index(
        "ix_cloud_prompts_project_session_id", "cloud_prompts", ["project", "session_id"]
    )
    op.create_index("ix_cloud_prompts_search", "cloud_prompts", ["search"], postgresql_using="gin")

    op.create_table(
        "cloud_tombstones",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("entity", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("deleted_at", sa.Text),
        sa.PrimaryKeyConstraint("project", "entity", "key", name="pk_cloud_tombstones"),
    )

    op.create_table(
        "cloud_project_controls",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("sync_enabled", sa.Boolean, nullable=False, server_default=sa.text("true")),
        sa.Column("paused_reason", sa.Text),
        sa.Column("updated_by", sa.Text),
        sa.Column("updated_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("project", name="pk_cloud_project_controls"),
    )

    op.create_table(
        "cloud_sync_audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("occurred_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("contributor", sa.Text, nullable=False),
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("entry_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("reason_code", sa.Text),
        sa.Column("principal_id", sa.BigInteger),
        sa.Column("metadata", postgresql.JSONB),
        sa.PrimaryKeyConstraint("id", name="pk_cloud_sync_audit_log"),
    )
    op.create_index(
        "ix_cloud_sync_audit_log_occurred_at",
        "cloud_sync_audit_log",
        [sa.text("occurred_at DESC")],
    )
    op.create_index(
        "ix_cloud_sync_audit_log_contributor_project",
        "cloud_sync_audit_log",
        ["contributor", "project"],
    )
    op.create_index("ix_cloud_sync_audit_log_outcome", "cloud_sync_audit_log", ["outcome"])


def downgrade() -> None:
    for table in (
        "cloud_sync_audit_log",
        "cloud_project_controls",
        "cloud_tombstones",
        "cloud_prompts",
        "cloud_observations",
        "cloud_sessions",
        "cloud_chunks",
        "cloud_mutations",
    ):
        op.drop_table(table)
