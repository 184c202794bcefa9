"""Importance, pins and validity in the read model (issue 21, docs/importance.md): the intent
fields a memory's payload carries — ``pinned``, ``importance_override``, ``valid_from``,
``valid_to``, ``delete_reason`` (``archived``), ``superseded_by``, ``reviewed_at`` — become
columns of ``cloud_observations``, so the dashboard can show them.

Records pushed before this revision already hold these fields in the log; `engram cloud
rebuild-read-model` fills the new columns from it (a fresh read model needs nothing).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TEXT_COLUMNS = ("valid_from", "valid_to", "delete_reason", "superseded_by", "reviewed_at")


def upgrade() -> None:
    op.add_column(
        "cloud_observations",
        sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.text("false")),
    )
    op.add_column("cloud_observations", sa.Column("importance_override", sa.Double))
    for name in _TEXT_COLUMNS:
        op.add_column("cloud_observations", sa.Column(name, sa.Text))


def downgrade() -> None:
    for name in reversed(_TEXT_COLUMNS):
        op.drop_column("cloud_observations", name)
    op.drop_column("cloud_observations", "importance_override")
    op.drop_column("cloud_observations", "pinned")
