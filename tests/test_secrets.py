"""Secrets are caught where they enter: the pure detector, the store's save and update paths,
and every face (CLI, HTTP, MCP) — each redacts by default, says so, and keeps the text only when
the save explicitly allows it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from litestar.testing import TestClient

from engram.http.app import create_app
from engram.secrets import redact_secrets, redaction_warning
from engram.settings import Config
from engram.store import Store
from tests.support import run_engram
from tests.support.http import BASE_URL

GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
ANTHROPIC = "sk-ant-api03-" + "Zx9" * 12
KEY_BLOCK = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAA\n"
    "AAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "kind", "kept"),
    [
        (f"the CI token is {GITHUB} now", "github_token", "the CI token is "),
        (f"aws key {AWS}", "aws_access_key", "aws key "),
        (f"export ANTHROPIC_API_KEY={ANTHROPIC}", "anthropic_key", "export ANTHROPIC_API_KEY="),
        (f"deploy key:\n{KEY_BLOCK}\nrotate it", "private_key", "\nrotate it"),
        (
            "DATABASE_URL=postgres://app:hunter22@db.internal:5432/app",
            "url_password",
            "@db.internal",
        ),
        ('password = "s3cr3t-P4ss"', "password", 'password = "'),
        ("PGPASSWORD=hunter22 psql -h db", "password", " psql -h db"),
        ("aws_secret_access_key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret", "aws_secret"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "bearer_token", "Bearer "),
        ("xoxb-1234567890-abcdefghijkl in slack", "slack_token", " in slack"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_Xg",
            "jwt",
            "jwt ",
        ),
    ],
)
def test_each_kind_of_secret_is_replaced_and_the_rest_kept(text: str, kind: str, kept: str) -> None:
    result = redact_secrets(text)
    assert f"[REDACTED:{kind}]" in result.text
    assert kind in result.kinds
    assert kept in result.text
    for secret in (GITHUB, AWS, ANTHROPIC, "hunter22", "s3cr3t-P4ss", "wJalrXUtnFEMI", "b3Blbn"):
        assert secret not in result.text


@pytest.mark.parametrize(
    "text",
    [
        "the token expired early; fixed the refresh in auth/session.py",
        "the token: expired early",
        "max_tokens = 1000",
        'password = request.form["password"]',
        "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
        "password: changeme",
        "monkey=abc12345x",
        "see https://example.com/path?a=b and git@github.com:acme/app.git",
        "",
    ],
)
def test_ordinary_developer_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text).text == text
    assert not redact_secrets(text).redacted


def test_a_redacted_text_stays_as_it_is() -> None:
    once = redact_secrets(f"token {GITHUB} and password=hunter22x").text
    assert redact_secrets(once).text == once


def test_the_warning_names_kinds_and_counts() -> None:
    warning = redaction_warning(["github_token", "github_token", "password"])
    assert warning is not None
    assert "github_token ×2" in warning and "password" in warning
    assert redaction_warning([]) is None


def test_store_save_update_and_prompt_redact_unless_allowed(store: Store) -> None:
    saved = store.add_observation(
        title=f"key {AWS}", content=f"**What**: the bot uses {GITHUB}", project="acme"
    )
    obs = saved.observation
    assert AWS not in obs.title and GITHUB not in obs.content
    assert "[REDACTED:github_token]" in obs.content
    assert any("github_token" in w for w in saved.warnings)
    assert any("title" in w and "aws_access_key" in w for w in saved.warnings)
    # The journal (what sync sends) never saw the secret either.
    journal = store.db.rows("SELECT record FROM sync_journal")
    assert not any(GITHUB in str(row[0]) for row in journal)
    assert not any(GITHUB in e.record for e in store.journal.pending("t"))  # the text sent

    warnings: list[str] = []
    store.update_observation(obs.id, content=f"now {ANTHROPIC}", warnings=warnings)
    assert "[REDACTED:anthropic_key]" in store.get_observation(obs.id).content
    assert warnings and "anthropic_key" in warnings[0]

    kept = store.add_observation(
        title="fixture", content=f"test fixture {GITHUB}", project="acme", allow_secrets=True
    )
    assert GITHUB in kept.observation.content and kept.warnings == []
    store.update_observation(obs.id, content=f"again {ANTHROPIC}", allow_secrets=True)
    assert ANTHROPIC in store.get_observation(obs.id).content

    prompt = store.add_prompt(f"use {GITHUB} to push", project="acme")
    assert GITHUB not in prompt.content and "[REDACTED:github_token]" in prompt.content
    assert GITHUB in store.add_prompt(f"use {GITHUB}", project="acme", allow_secrets=True).content


def test_passive_capture_redacts_too(store: Store) -> None:
    store.capture_passive(
        f"## Key Learnings:\n1. The deploy token {GITHUB} lives in the vault now\n",
        project="acme",
    )
    [obs] = store.recent_observations("acme")
    assert GITHUB not in obs.content and "[REDACTED:github_token]" in obs.content


def test_cli_save_redacts_and_allow_secrets_keeps(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run_engram("save", "deploy", f"token {GITHUB}", "--project", "acme", data_dir=data)
    assert done.returncode == 0, done.stderr
    assert "Secrets redacted" in done.stdout and GITHUB not in done.stdout
    done = run_engram(
        "save", "fixture", f"token {GITHUB}", "--project", "acme", "--allow-secrets", "--json",
        data_dir=data,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert GITHUB in orjson.loads(done.stdout)["content"]
    with Store.open(config=Config(data_dir=data)) as store:
        contents = [o.content for o in store.recent_observations("acme")]
    assert contents == [f"token {GITHUB}", "token [REDACTED:github_token]"]


def test_http_save_patch_and_prompt_redact_unless_allowed(store: Store) -> None:
    with TestClient(create_app(store), base_url=BASE_URL) as http:
        body = http.post(
            "/observations", json={"title": "t", "content": f"key {AWS}", "project": "acme"}
        ).json()
        assert "[REDACTED:aws_access_key]" in body["observation"]["content"]
        assert any("aws_access_key" in w for w in body["warnings"])
        patched = http.patch(f"/observations/{body['id']}", json={"content": f"k {GITHUB}"})
        assert "[REDACTED:github_token]" in patched.json()["content"]
        kept = http.patch(
            f"/observations/{body['id']}", json={"content": f"k {GITHUB}", "allow_secrets": True}
        )
        assert GITHUB in kept.json()["content"]
        allowed = http.post(
            "/observations",
            json={"title": "t2", "content": f"key {AWS}", "project": "acme", "allow_secrets": True},
        ).json()
        assert AWS in allowed["observation"]["content"] and allowed["warnings"] == []
        prompt = http.post("/prompts", json={"content": f"push with {GITHUB}", "project": "acme"})
        assert GITHUB not in prompt.text


@pytest.mark.anyio
async def test_mcp_save_and_update_redact_and_say_so(tmp_path: Path) -> None:
    from tests.mcp.client import call, engram_mcp, saved_id

    data, workdir = tmp_path / "data", tmp_path / "acme"
    workdir.mkdir()
    async with engram_mcp(data, workdir) as session:
        saved = await call(session, "mem_save", title="deploy", content=f"token {GITHUB}")
        assert "Secrets redacted" in saved["result"] and GITHUB not in saved["result"]
        memory = saved_id(saved)
        updated = await call(session, "mem_update", id=memory, content=f"now {ANTHROPIC}")
        assert "anthropic_key" in updated["result"]
        await call(
            session, "mem_save", title="fixture", content=f"raw {GITHUB}", allow_secrets=True
        )
    with Store.open(config=Config(data_dir=data)) as store:
        contents = sorted(o.content for o in store.recent_observations("acme"))
    assert contents == ["now [REDACTED:anthropic_key]", f"raw {GITHUB}"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
