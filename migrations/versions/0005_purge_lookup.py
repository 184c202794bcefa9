"""An index of the mutation log by key: a hard delete blanks the texts of that key's earlier
records in the push transaction (engram_cloud.purge), which must not scan the whole log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_cloud_mutations_project_entity_key", "cloud_mutations", ["project", "entity", "key"]
    )


def downgrade() -> None:
    op.drop_index("ix_cloud_mutations_project_entity_key", table_name="cloud_mutations")
