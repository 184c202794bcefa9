"""The first seed's Worker API on the machines table ("one table, two vocabularies"): every
machine gets an integer ``id`` (the seed's ``worker_id``, now the primary key), a ``kind`` saying
how it is keyed — ``engram`` by ``origin`` (our clients, as before) or ``seed`` by ``hostname``
(the seed's workers, which have no origin) — and the seed's fields ``tailscale_ip``,
``local_ip``, ``ram_gb`` and ``gpu_type``.

Existing records keep everything and become ``engram`` machines numbered in the order they were
first seen. Downgrading drops the seed's machines (they have no origin, which the older schema
keys by) and the seed's fields.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("cloud_workers", sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False))
    # Number existing machines by first sight (an identity column added to a filled table
    # numbers rows in storage order), then let the identity continue after them.
    op.execute(
        """UPDATE cloud_workers SET id = numbered.n FROM (
               SELECT origin, row_number() OVER (ORDER BY first_seen_at, origin) AS n
               FROM cloud_workers) AS numbered
           WHERE cloud_workers.origin = numbered.origin"""
    )
    op.execute(
        "SELECT setval(pg_get_serial_sequence('cloud_workers', 'id'), "
        "COALESCE((SELECT max(id) FROM cloud_workers), 0) + 1, false)"
    )
    op.drop_constraint("pk_cloud_workers", "cloud_workers", type_="primary")
    op.create_primary_key("pk_cloud_workers", "cloud_workers", ["id"])
    op.alter_column("cloud_workers", "origin", nullable=True)
    op.create_index("ix_cloud_workers_origin", "cloud_workers", ["origin"], unique=True)
    op.add_column(
        "cloud_workers", sa.Column("kind", sa.Text, nullable=False, server_default="engram")
    )
    for name in ("tailscale_ip", "local_ip"):
        op.add_column("cloud_workers", sa.Column(name, sa.Text))
    op.add_column("cloud_workers", sa.Column("ram_gb", sa.Double))
    op.add_column("cloud_workers", sa.Column("gpu_type", sa.Text))
    op.create_check_constraint(
        "ck_cloud_workers_kind",
        "cloud_workers",
        "kind IN ('engram', 'seed') AND (kind = 'engram') = (origin IS NOT NULL)",
    )
    op.create_index(
        "ix_cloud_workers_seed_hostname",
        "cloud_workers",
        ["hostname"],
        unique=True,
        postgresql_where=sa.text("kind = 'seed'"),
    )


def downgrade() -> None:
    op.execute("DELETE FROM cloud_workers WHERE kind <> 'engram'")
    op.drop_index("ix_cloud_workers_seed_hostname", table_name="cloud_workers")
    op.drop_constraint("ck_cloud_workers_kind", "cloud_workers", type_="check")
    for name in ("gpu_type", "ram_gb", "local_ip", "tailscale_ip", "kind"):
        op.drop_column("cloud_workers", name)
    op.drop_index("ix_cloud_workers_origin", table_name="cloud_workers")
    op.alter_column("cloud_workers", "origin", nullable=False)
    op.drop_constraint("pk_cloud_workers", "cloud_workers", type_="primary")
    op.create_primary_key("pk_cloud_workers", "cloud_workers", ["origin"])
    op.drop_column("cloud_workers", "id")
