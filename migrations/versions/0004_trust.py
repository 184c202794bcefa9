"""Trust hardening: mutations the read model holds back (``held``: ``clock_skew`` for a record
stored before the clock bound existed whose hlc is still beyond the server's clock + drift), and
who owns each machine record (``owner``: only that principal's heartbeats may update it).

Existing machine records get their owner from the principal that last wrote them; a record whose
principal cannot be told (none of the known legacy names) gets ``''`` and is claimed by its next
heartbeat. Which records to hold is decided by ``engram cloud repair-clocks`` (also run when the
server starts), not here: it depends on the server's clock and configured drift.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("cloud_mutations", sa.Column("held", sa.Text))
    op.create_index(
        "ix_cloud_mutations_held",
        "cloud_mutations",
        ["seq"],
        postgresql_where=sa.text("held IS NOT NULL"),
    )
    op.add_column("cloud_workers", sa.Column("owner", sa.Text, nullable=False, server_default=""))
    op.execute(
        """UPDATE cloud_workers SET owner = CASE
               WHEN principal_id IS NOT NULL THEN 'principal:' || principal_id
               WHEN principal_name = 'legacy' THEN 'legacy_env'
               WHEN principal_name = 'admin' THEN 'legacy_admin_env'
               WHEN principal_name = 'insecure-dev' THEN 'insecure'
               ELSE '' END"""
    )


def downgrade() -> None:
    op.drop_column("cloud_workers", "owner")
    op.drop_index("ix_cloud_mutations_held", table_name="cloud_mutations")
    op.drop_column("cloud_mutations", "held")
