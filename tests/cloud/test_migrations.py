"""The alembic history: upgrade from empty, downgrade one step, and the migrated schema matches
the models exactly."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from engram_cloud import models
from engram_cloud.db import create_db_engine
from engram_cloud.migrate import downgrade, head_revision, schema_status, upgrade


def test_upgrade_from_empty_then_downgrade_one_step_and_back(postgres_url: str) -> None:
    engine = create_db_engine(postgres_url)
    try:
        status = schema_status(engine)
        assert status.current is None and not status.up_to_date
        assert "no Engram schema" in status.describe()

        status = upgrade(engine)
        assert status.up_to_date and status.current == head_revision()
        tables = set(inspect(engine).get_table_names())
        assert {t.name for t in models.metadata.sorted_tables} <= tables

        status = downgrade(engine)  # one step: the latest revision only
        assert status.current == "0007" and not status.up_to_date
        assert "cloud_relations" not in inspect(engine).get_table_names()

        status = downgrade(engine)
        assert status.current == "0006" and not status.up_to_date
        columns = {c["name"] for c in inspect(engine).get_columns("cloud_observations")}
        assert not {"pinned", "importance_override", "valid_to", "superseded_by"} & columns

        status = downgrade(engine)
        assert status.current == "0005"
        columns = {c["name"] for c in inspect(engine).get_columns("cloud_workers")}
        assert not {"id", "kind", "tailscale_ip", "ram_gb", "gpu_type"} & columns
        assert inspect(engine).get_pk_constraint("cloud_workers")["constrained_columns"] == [
            "origin"
        ]

        status = downgrade(engine)
        assert status.current == "0004" and not status.up_to_date
        by_key = {i["name"] for i in inspect(engine).get_indexes("cloud_mutations")}
        assert "ix_cloud_mutations_project_entity_key" not in by_key

        status = downgrade(engine)
        assert status.current == "0003"
        columns = {c["name"] for c in inspect(engine).get_columns("cloud_mutations")}
        assert "held" not in columns and "record" in columns
        assert "owner" not in {c["name"] for c in inspect(engine).get_columns("cloud_workers")}
        assert "needs" in status.describe()

        status = downgrade(engine)
        assert status.current == "0002"
        live = {i["name"] for i in inspect(engine).get_indexes("cloud_observations")}
        assert "ix_cloud_observations_live" not in live
        assert "cloud_principals" in inspect(engine).get_table_names()

        assert upgrade(engine).up_to_date
        assert downgrade(engine, "base").current is None
        assert not {t.name for t in models.metadata.sorted_tables} & set(
            inspect(engine).get_table_names()
        )
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(cloud_db_url: str) -> None:
    engine = create_db_engine(cloud_db_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, models.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_seed_workers_migration_keeps_machines_and_numbers_them(postgres_url: str) -> None:
    """0006 gives existing machines ids in the order they were first seen (new ones continue
    after them) and makes them ``engram`` machines; going back drops only the seed's machines."""
    engine = create_db_engine(postgres_url)
    try:
        upgrade(engine, "0005")
        with engine.begin() as conn:
            for origin, age in (("b" * 16, "1 hour"), ("a" * 16, "2 hours")):
                conn.execute(
                    text(
                        "INSERT INTO cloud_workers (origin, hostname, first_seen_at, owner) "
                        f"VALUES ('{origin}', 'host-{origin[0]}', now() - interval '{age}', 'x')"
                    )
                )
        upgrade(engine)
        with engine.begin() as conn:
            rows = conn.execute(
                text("SELECT id, origin, kind, ram_gb FROM cloud_workers ORDER BY id")
            ).all()
            assert [tuple(r) for r in rows] == [
                (1, "a" * 16, "engram", None),
                (2, "b" * 16, "engram", None),
            ]
            seed_id = conn.execute(
                text(
                    "INSERT INTO cloud_workers (kind, hostname, tailscale_ip, ram_gb, gpu_type) "
                    "VALUES ('seed', 'edge-nano-01', '100.64.0.5', 8.0, 'edge device') "
                    "RETURNING id"
                )
            ).scalar_one()
            assert seed_id == 3
        with engine.begin() as conn, pytest.raises(IntegrityError):  # a seed machine has no origin
            conn.execute(
                text("INSERT INTO cloud_workers (kind, origin, hostname) VALUES ('seed', 'c', 'h')")
            )
        with engine.begin() as conn, pytest.raises(IntegrityError):  # one seed machine per name
            conn.execute(
                text("INSERT INTO cloud_workers (kind, hostname) VALUES ('seed', 'edge-nano-01')")
            )
        downgrade(engine, "0005")  # below 0006, whatever revisions came after it
        with engine.begin() as conn:
            left = conn.execute(text("SELECT origin FROM cloud_workers ORDER BY origin")).scalars()
            assert list(left) == ["a" * 16, "b" * 16]
        assert upgrade(engine).up_to_date
    finally:
        engine.dispose()
