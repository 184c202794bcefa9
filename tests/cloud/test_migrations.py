"""The alembic history: upgrade from empty, downgrade one step, and the migrated schema matches
the models exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

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
        assert status.current == "0004" and not status.up_to_date
        by_key = {i["name"] for i in inspect(engine).get_indexes("cloud_mutations")}
        assert "ix_cloud_mutations_project_entity_key" not in by_key

        status = downgrade(engine)
        assert status.current == "0003" and not status.up_to_date
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
