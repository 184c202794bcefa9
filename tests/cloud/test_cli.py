"""``engram cloud migrate|rebuild-read-model|admin …|serve``: refusals as real processes, the
many admin commands in-process through the same ``main()`` (a process start costs seconds)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from alembic.script import ScriptDirectory

from engram.cli.main import main
from engram_cloud.migrate import alembic_config, head_revision
from tests.support import free_port, run_engram
from tests.support.cloud import JWT_SECRET


def env_for(url: str, **extra: str) -> dict[str, str]:
    return {
        "ENGRAM_DATABASE_URL": url,
        "ENGRAM_JWT_SECRET": JWT_SECRET,
        "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
        **extra,
    }


def cloud_process(data_dir: Path, env: dict[str, str], *args: str):
    return run_engram("cloud", *args, data_dir=data_dir, env=env, timeout=120)


def one_line_error(result) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("engram: error: ")
    return lines[0]


@dataclass
class InProcess:
    """``cloud(data_dir, env, *args)`` run through ``main()`` in this process."""

    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def __call__(self, data_dir: Path, env: dict[str, str], *args: str):
        with self.monkeypatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            patch.setenv("ENGRAM_DATA_DIR", str(data_dir))
            code = main(["cloud", *args])
        out, err = self.capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)


def test_migrate_status_and_downgrade(
    data_dir: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = env_for(postgres_url)
    in_process = InProcess(monkeypatch, capsys)
    status = in_process(data_dir, env, "migrate", "--status")
    assert status.returncode == 0 and "no Engram schema yet" in status.stdout
    refused = cloud_process(data_dir, env, "serve", "--port", str(free_port()))
    assert "run 'engram cloud migrate' first, or start with --migrate" in one_line_error(refused)
    cloud = in_process
    up = cloud(data_dir, env, "--json", "migrate")
    assert up.returncode == 0, up.stderr
    head = head_revision()
    previous = ScriptDirectory.from_config(alembic_config()).get_revision(head).down_revision
    assert orjson.loads(up.stdout) == {"from": None, "to": head, "head": head, "up_to_date": True}
    again = cloud(data_dir, env, "migrate")
    assert again.stdout.startswith("Nothing to do: schema is current")
    down = cloud(data_dir, env, "migrate", "--downgrade", "-1")
    assert down.returncode == 0 and f"Migrated from {head} to {previous}" in down.stdout
    assert f"needs {head}" in cloud(data_dir, env, "migrate", "--status").stdout


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"ENGRAM_CLOUD_ALLOWED_PROJECTS": ""}, "ENGRAM_CLOUD_ALLOWED_PROJECTS is required"),
        ({"ENGRAM_JWT_SECRET": "weak"}, "ENGRAM_JWT_SECRET is too weak"),
        (
            {"ENGRAM_CLOUD_INSECURE_NO_AUTH": "1", "ENGRAM_CLOUD_TOKEN": "t" * 30},
            "cannot be combined",
        ),
        (
            {"ENGRAM_DATABASE_URL": "postgresql://nobody@127.0.0.1:{port}/none"},
            "database unreachable at",
        ),
        ({"ENGRAM_CLOUD_TOKEN": "team-token-2026"}, "ENGRAM_CLOUD_TOKEN is too short (15"),
        ({"ENGRAM_CLOUD_ADMIN": "admin"}, "ENGRAM_CLOUD_ADMIN is too short (5 characters)"),
    ],
)
def test_serve_refuses_bad_configs_with_one_line(
    data_dir: Path, cloud_db_url: str, change: dict[str, str], expected: str
) -> None:
    change = {k: v.format(port=free_port()) for k, v in change.items()}
    result = cloud_process(
        data_dir, env_for(cloud_db_url, **change), "serve", "--port", str(free_port())
    )
    assert expected in one_line_error(result)


def test_admin_commands(
    data_dir: Path,
    cloud_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = env_for(cloud_db_url)
    cloud = InProcess(monkeypatch, capsys)
    created = cloud(
        data_dir,
        env,
        "admin",
        "create-user",
        "alice",
        "--role",
        "admin",
        "--email",
        "alice@example.com",
    )
    assert created.returncode == 0 and "Created human 'alice'" in created.stdout
    assert "already exists" in one_line_error(cloud(data_dir, env, "admin", "create-user", "alice"))
    robot = cloud(data_dir, env, "--json", "admin", "create-user", "ci", "--service-account")
    assert orjson.loads(robot.stdout)["kind"] == "service_account"
    issued = cloud(data_dir, env, "admin", "issue-token", "alice", "--name", "laptop")
    token = issued.stdout.splitlines()[0]
    assert token.startswith("egt_") and "only time it is shown" in issued.stdout
    listed = cloud(data_dir, env, "admin", "list-tokens", "alice")
    assert token not in listed.stdout and token[:12] in listed.stdout
    assert cloud(data_dir, env, "admin", "grant", "alice", "Acme", "widgets").stdout.startswith(
        "Granted acme, widgets to 'alice'"
    )
    grants = orjson.loads(cloud(data_dir, env, "--json", "admin", "grants", "alice").stdout)
    assert [g["project"] for g in grants["grants"]] == ["acme", "widgets"]
    assert cloud(data_dir, env, "admin", "revoke", "alice", "widgets").returncode == 0
    assert "no grant" in one_line_error(cloud(data_dir, env, "admin", "revoke", "alice", "widgets"))
    users = orjson.loads(cloud(data_dir, env, "--json", "admin", "list-users").stdout)["users"]
    assert [u["username"] for u in users] == ["alice", "ci"]
    token_id = str(
        orjson.loads(cloud(data_dir, env, "--json", "admin", "list-tokens", "alice").stdout)[
            "tokens"
        ][0]["id"]
    )
    assert "Revoked token" in cloud(data_dir, env, "admin", "revoke-token", token_id).stdout
    assert cloud(data_dir, env, "admin", "disable-user", "ci").stdout.startswith("Disabled 'ci'")
    paused = cloud(data_dir, env, "admin", "pause", "acme", "--reason", "maintenance")
    assert "Paused sync for 'acme'" in paused.stdout
    assert "Resumed" in cloud(data_dir, env, "admin", "resume", "acme").stdout
    assert cloud(data_dir, env, "admin", "audit").stdout.strip() == "No audit rows."
    rebuilt = cloud(data_dir, env, "rebuild-read-model")
    assert rebuilt.returncode == 0 and "0 mutations applied" in rebuilt.stdout
    # Without the server's secrets, a token cannot be issued (its hash needs the pepper).
    no_secret = env_for(cloud_db_url, ENGRAM_JWT_SECRET="")
    assert "ENGRAM_JWT_SECRET is required" in one_line_error(
        cloud(data_dir, no_secret, "admin", "issue-token", "alice")
    )
