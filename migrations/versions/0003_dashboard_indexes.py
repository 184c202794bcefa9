"""Indexes for the dashboard's lists: live memories of a project, newest first (a partial index,
so counting and paging skip soft-deleted rows without reading the table), and prompts of a
project by time.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_cloud_observations_live",
        "cloud_observations",
        ["project", sa.text("created_at DESC")],
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_index(
        "ix_cloud_prompts_project_created_at", "cloud_prompts", ["project", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_cloud_prompts_project_created_at", table_name="cloud_prompts")
    op.drop_index("ix_cloud_observations_live", table_name="cloud_observations")
