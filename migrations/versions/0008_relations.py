"""Relations between memories (issue 20): the read model's ``cloud_relations``, the winning
state of every relation per project, applied from the mutation log like the other entities.
Existing relation records (none: earlier servers refused them) need no backfill; ``engram cloud
rebuild`` recomputes the table from the log anyway.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cloud_relations",
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("sync_id", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False, server_default="project"),
        sa.Column("source_id", sa.Text, nullable=False),
        sa.Column("target_id", sa.Text, nullable=False),
        sa.Column("relation", sa.Text, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("evidence", sa.Text),
        sa.Column("confidence", sa.Float),
        sa.Column("judgment_status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("marked_by_actor", sa.Text),
        sa.Column("marked_by_kind", sa.Text),
        sa.Column("marked_by_model", sa.Text),
        sa.Column("session_id", sa.Text),
        sa.Column("superseded_at", sa.Text),
        sa.Column("superseded_by_relation_id", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.Column("hlc", sa.Text, nullable=False),
        sa.Column("contributor", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "applied_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("project", "sync_id", name="pk_cloud_relations"),
    )
    op.create_index(
        "ix_cloud_relations_project_source_id", "cloud_relations", ["project", "source_id"]
    )
    op.create_index(
        "ix_cloud_relations_project_target_id", "cloud_relations", ["project", "target_id"]
    )


def downgrade() -> None:
    op.drop_table("cloud_relations")
