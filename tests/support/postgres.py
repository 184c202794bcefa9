"""A throwaway PostgreSQL cluster for tests: one per test session (per xdist worker), one fresh
database per test.

The cluster is started from the machine's own PostgreSQL binaries with ``initdb`` + ``pg_ctl``
(as the ``postgres`` system user when the tests run as root, since ``initdb`` refuses root), in a
temp directory under /tmp, listening on a free loopback port with fsync off. Nothing is mocked.

Use it from any test package's ``conftest.py``::

    from tests.support.postgres import (  # noqa: F401  (pytest finds fixtures by name)
        fixture_cloud_db_url,
        fixture_cloud_template,
        fixture_postgres_cluster,
        fixture_postgres_url,
    )

* ``postgres_cluster`` (session): the running :class:`PostgresCluster`.
* ``postgres_url`` (test): the SQLAlchemy URL of a fresh, empty database.
* ``cloud_db_url`` (test): the URL of a fresh database already migrated to the cloud schema's
  head (cloned from a template that is migrated once per session, so it costs ~50 ms).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_port


def _bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries (Debian layout), else whatever is on PATH."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError("PostgreSQL server binaries (initdb) are not installed; run .ci/run")


class PostgresCluster:
    """A private PostgreSQL server: start, stop, restart, and databases on demand."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.as_root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="engram-pg-", dir="/tmp"))
        self.data = self.dir / "data"
        self.log = self.dir / "log"
        self.port = free_port()
        self.host = "127.0.0.1"
        self.user = "postgres"
        if self.as_root:
            shutil.chown(self.dir, user="postgres", group="postgres")

    # --- processes ---------------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}): {result.stderr.strip()}\n{log}"
            )
        return result

    def init(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        )

    @property
    def _options(self) -> str:
        return (
            f"-p {self.port} -k {self.dir} -c listen_addresses={self.host} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
            "-c shared_buffers=64MB"
        )

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-o", self._options, "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop and start the server: every open connection is cut (tests of resilience)."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- databases ---------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3) of ``database``."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """libpq URL of ``database`` (for psycopg directly)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    @functools.cached_property
    def version(self) -> int:
        """``server_version_num`` (e.g. 150004)."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            row = conn.execute("SHOW server_version_num").fetchone()
        return int(row[0]) if row else 0

    def execute(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """Create a database (optionally cloned from ``template``); returns its name."""
        name = name or "t_" + uuid.uuid4().hex[:16]
        clause = ""
        if template:
            # FILE_COPY (PostgreSQL 15+) clones a small template ~3x faster than WAL_LOG.
            strategy = " STRATEGY FILE_COPY" if self.version >= 150000 else ""
            clause = f' TEMPLATE "{template}"{strategy}'
        self.execute(f'CREATE DATABASE "{name}"{clause}')
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", name="postgres_cluster")
def fixture_postgres_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(name="postgres_url")
def fixture_postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh empty database for one test, dropped afterwards."""
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="session", name="cloud_template")
def fixture_cloud_template(postgres_cluster: PostgresCluster) -> str:
    """A database migrated to the cloud schema's head, used as a template (never connected to
    by tests, since ``CREATE DATABASE … TEMPLATE`` needs it idle)."""
    from engram_cloud.db import create_db_engine
    from engram_cloud.migrate import upgrade

    name = postgres_cluster.create_database("cloud_template")
    engine = create_db_engine(postgres_cluster.url(name))
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return name


@pytest.fixture(name="cloud_db_url")
def fixture_cloud_db_url(postgres_cluster: PostgresCluster, cloud_template: str) -> Iterator[str]:
    """A fresh database at the cloud schema's head for one test, dropped afterwards."""
    name = postgres_cluster.create_database(template=cloud_template)
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)
