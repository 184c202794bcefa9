"""``engram setup <agent>`` for every client: right file and shape, merge without loss, backup,
idempotence, invalid files left untouched — and a configured entry that really starts Engram."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import orjson
import pytest

from engram.mcp import setup as agent_setup
from engram.mcp.setup import AGENTS, ConfigFileError, Place, setup
from tests.mcp.client import call, engram_mcp
from tests.support import run_engram

COMMAND = ["/opt/engram/bin/engram", "mcp"]
EXPECTED: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "claude-code": (
        ".claude.json",
        ("mcpServers", "engram"),
        {"type": "stdio", "command": COMMAND[0], "args": ["mcp"]},
    ),
    "claude-desktop": (
        ".config/Claude/claude_desktop_config.json",
        ("mcpServers", "engram"),
        {"command": COMMAND[0], "args": ["mcp"]},
    ),
    "codex": (
        ".codex/config.toml",
        ("mcp_servers", "engram"),
        {"command": COMMAND[0], "args": ["mcp"]},
    ),
    "gemini-cli": (
        ".gemini/settings.json",
        ("mcpServers", "engram"),
        {"command": COMMAND[0], "args": ["mcp"]},
    ),
    "opencode": (
        ".config/opencode/opencode.json",
        ("mcp", "engram"),
        {"type": "local", "command": COMMAND, "enabled": True},
    ),
    "cursor": (
        ".cursor/mcp.json",
        ("mcpServers", "engram"),
        {"command": COMMAND[0], "args": ["mcp"]},
    ),
    "vscode": (
        ".config/Code/User/mcp.json",
        ("servers", "engram"),
        {"type": "stdio", "command": COMMAND[0], "args": ["mcp"]},
    ),
}
OTHER_SERVER = {"command": "npx", "args": ["-y", "other-server"]}


@pytest.fixture
def place(tmp_path: Path) -> Place:
    home = tmp_path / "home"
    home.mkdir()
    return Place(home=home, platform="linux", env={})


def load(path: Path) -> dict[str, Any]:
    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else orjson.loads(text)


def dig(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        data = data[key]
    return data


def existing_config(agent: str) -> str:
    """A realistic file of that client, with another server and unrelated settings."""
    if agent == "codex":
        return (
            '# my codex settings\nmodel = "gpt-5"  # keep this comment\n\n'
            '[mcp_servers.other]\ncommand = "npx"\nargs = ["-y", "other-server"]\n'
        )
    container = EXPECTED[agent][1][0]
    other = {"type": "local", "command": ["npx", "other"]} if agent == "opencode" else OTHER_SERVER
    return orjson.dumps({"theme": "dark", container: {"other": other}, "z-last": [1, 2]}).decode()


def test_agents_table_covers_the_issue() -> None:
    assert set(AGENTS) == set(EXPECTED)


@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_fresh_setup_writes_the_documented_entry_then_is_idempotent(
    agent: str, place: Place
) -> None:
    relative, keys, entry = EXPECTED[agent]
    first = setup(agent, command=COMMAND, place=place)
    path = place.home / relative
    assert (first.status, first.path, first.backup) == ("added", path, None)
    assert dig(load(path), keys) == entry

    before = path.read_bytes(), path.stat().st_mtime_ns
    second = setup(agent, command=COMMAND, place=place)
    assert second.status == "already_configured" and second.backup is None
    assert "already configured" in second.message() and "nothing changed" in second.message()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert not path.with_name(path.name + ".bak").exists()


@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_setup_merges_into_an_existing_file_and_keeps_a_backup(agent: str, place: Place) -> None:
    relative, keys, entry = EXPECTED[agent]
    path = place.home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    original = existing_config(agent)
    path.write_text(original)
    path.chmod(0o600)

    result = setup(agent, command=COMMAND, place=place)
    assert result.status == "added"
    assert result.backup == path.with_name(path.name + ".bak")
    assert result.backup.read_text() == original
    assert path.stat().st_mode & 0o777 == 0o600

    data = load(path)
    assert dig(data, keys) == entry
    assert "other" in dig(data, keys[:-1])  # the user's other server is still there
    if agent == "codex":
        assert data["model"] == "gpt-5"
        assert "# my codex settings" in path.read_text()
        assert "# keep this comment" in path.read_text()
    else:
        assert data["theme"] == "dark" and data["z-last"] == [1, 2]
    assert setup(agent, command=COMMAND, place=place).status == "already_configured"


@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_invalid_config_is_left_untouched_and_reported(agent: str, place: Place) -> None:
    path = place.home / EXPECTED[agent][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    broken = b'[mcp_servers\ncommand = "x' if agent == "codex" else b'{"mcpServers": {,}'
    path.write_bytes(broken)
    kind = "TOML" if agent == "codex" else "JSON"
    with pytest.raises(ConfigFileError, match=f"not valid {kind}.*left untouched"):
        setup(agent, command=COMMAND, place=place)
    assert path.read_bytes() == broken
    assert not path.with_name(path.name + ".bak").exists()


def test_wrong_shapes_are_refused_too(place: Place) -> None:
    path = place.home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    for text in ('["a list"]', '{"mcpServers": "not an object"}'):
        path.write_text(text)
        with pytest.raises(ConfigFileError, match="left untouched"):
            setup("cursor", command=COMMAND, place=place)
        assert path.read_text() == text


def test_a_moved_engram_is_updated_keeping_the_users_additions(place: Place) -> None:
    path = place.home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    old = {"command": "/old/engram", "args": ["mcp"], "env": {"ENGRAM_PROJECT": "x"}}
    path.write_text(orjson.dumps({"mcpServers": {"engram": old}}).decode())
    result = setup("gemini-cli", command=COMMAND, place=place)
    assert result.status == "updated"
    assert load(path)["mcpServers"]["engram"] == {
        "command": COMMAND[0],
        "args": ["mcp"],
        "env": {"ENGRAM_PROJECT": "x"},
    }
    codex = place.home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('[mcp_servers.engram]\ncommand = "/old"\nargs = ["mcp"]\ntimeout = 30\n')
    assert setup("codex", command=COMMAND, place=place).status == "updated"
    assert load(codex)["mcp_servers"]["engram"] == {**EXPECTED["codex"][2], "timeout": 30}


def test_print_only_changes_nothing(place: Place) -> None:
    result = setup("codex", command=COMMAND, place=place, print_only=True)
    assert result.status == "printed"
    assert (
        result.snippet
        == '[mcp_servers.engram]\ncommand = "/opt/engram/bin/engram"\nargs = ["mcp"]\n'
    )
    assert not (place.home / ".codex").exists()
    assert "add this to" in result.message()


def test_platform_locations_and_overrides(tmp_path: Path) -> None:
    home = tmp_path
    mac = Place(home, "darwin", {})
    assert AGENTS["claude-desktop"].config_path(mac) == (
        home / "Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert (
        AGENTS["vscode"].config_path(mac) == home / "Library/Application Support/Code/User/mcp.json"
    )
    windows = Place(home, "win32", {"APPDATA": str(home / "Roaming")})
    assert AGENTS["claude-desktop"].config_path(windows) == (
        home / "Roaming/Claude/claude_desktop_config.json"
    )
    assert AGENTS["vscode"].config_path(windows) == home / "Roaming/Code/User/mcp.json"
    linux = Place(home, "linux", {"XDG_CONFIG_HOME": str(home / "xdg"), "CODEX_HOME": "/c"})
    assert AGENTS["opencode"].config_path(linux) == home / "xdg/opencode/opencode.json"
    assert AGENTS["codex"].config_path(linux) == Path("/c/config.toml")
    (home / "xdg/opencode").mkdir(parents=True)
    (home / "xdg/opencode/opencode.jsonc").write_text("{}")
    assert AGENTS["opencode"].config_path(linux) == home / "xdg/opencode/opencode.jsonc"


def test_symlinked_config_is_edited_where_it_lives(place: Place, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}')
    link = place.home / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)
    setup("cursor", command=COMMAND, place=place)
    assert link.is_symlink()
    assert load(real)["mcpServers"]["engram"]["command"] == COMMAND[0]


def test_server_command_prefers_the_engram_script(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "engram"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    assert agent_setup.server_command(str(script)) == [str(script), "mcp"]
    python = str(tmp_path / "venv/bin/python")
    assert agent_setup.server_command("/x/engram/__main__.py", python) == [
        python,
        "-m",
        "engram",
        "mcp",
    ]
    with pytest.raises(Exception, match="unknown agent 'emacs'"):
        setup("emacs")
    assert agent_setup.find_agent("Claude").key == "claude-code"


@pytest.mark.parametrize("agent", ["vscode", "opencode"])
def test_jsonc_files_keep_their_comments_and_trailing_commas(agent: str, place: Place) -> None:
    """VS Code's mcp.json and OpenCode's opencode.jsonc nearly always carry comments."""
    relative, keys, entry = EXPECTED[agent]
    if agent == "opencode":
        relative = ".config/opencode/opencode.jsonc"
    path = place.home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    container = keys[0]
    original = (
        "// my editor's MCP servers\n"
        "{\n"
        f'  "{container}": {{\n'
        "    /* the one I use at work */\n"
        '    "other": {"command": "npx", "args": ["-y", "other-server"],}, // trailing\n'
        "  },\n"
        '  "theme": "dark",\n'
        "}\n"
    )
    path.write_text(original)
    result = setup(agent, command=COMMAND, place=place)
    assert result.status == "added"
    text = path.read_text()
    for kept in ("// my editor's MCP servers", "/* the one I use at work */", "// trailing"):
        assert kept in text
    from engram import jsonc

    data = jsonc.loads(text)
    assert data[container]["engram"] == entry and data[container]["other"] == OTHER_SERVER
    assert data["theme"] == "dark"
    assert result.backup is not None and result.backup.read_text() == original
    assert setup(agent, command=COMMAND, place=place).status == "already_configured"
    assert path.read_text() == text


def test_project_and_env_go_into_the_entry(place: Place) -> None:
    result = setup(
        "opencode", command=COMMAND, place=place, project="Acme-Web", env={"ENGRAM_DATA_DIR": "/d"}
    )
    entry = load(place.home / EXPECTED["opencode"][0])["mcp"]["engram"]
    assert entry["command"] == [*COMMAND, "--project", "acme-web"]
    assert entry["environment"] == {"ENGRAM_DATA_DIR": "/d"}  # OpenCode's own key
    assert result.warnings == []
    setup("cursor", command=COMMAND, place=place, env={"ENGRAM_PROJECT": "acme"})
    assert load(place.home / EXPECTED["cursor"][0])["mcpServers"]["engram"]["env"] == {
        "ENGRAM_PROJECT": "acme"
    }
    with pytest.raises(Exception, match="KEY=VALUE"):
        agent_setup.parse_env(["NOEQUALS"])


def test_claude_desktop_without_a_project_is_warned(place: Place) -> None:
    """Claude Desktop starts servers in / or $HOME: the project guess would be wrong, silently."""
    warned = setup("claude-desktop", command=COMMAND, place=place, print_only=True)
    assert warned.warnings and "--project" in warned.warnings[0]
    assert "Warning:" in warned.message()
    pinned = setup("claude-desktop", command=COMMAND, place=place, project="acme")
    assert pinned.warnings == []
    entry = load(place.home / EXPECTED["claude-desktop"][0])["mcpServers"]["engram"]
    assert entry["args"] == ["mcp", "--project", "acme"]


# --- the real command -----------------------------------------------------------------------


def home_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": "", "CODEX_HOME": "", "APPDATA": ""}


def test_cli_setup_list_print_json_and_errors(tmp_path: Path, data_dir: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home)
    listed = run_engram("setup", data_dir=data_dir, env=env)
    assert listed.returncode == 0
    assert "claude-code" in listed.stdout and "no config file" in listed.stdout

    shown = run_engram("setup", "cursor", "--print", data_dir=data_dir, env=env)
    assert shown.returncode == 0 and '"mcpServers"' in shown.stdout
    assert not (home / ".cursor").exists()

    done = run_engram("setup", "cursor", "--json", data_dir=data_dir, env=env)
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["status"] == "added" and report["path"] == str(home / ".cursor/mcp.json")
    again = run_engram("setup", "cursor", data_dir=data_dir, env=env)
    assert "already configured" in again.stdout
    assert "configured " in run_engram("setup", data_dir=data_dir, env=env).stdout

    bad = home / "broken.json"
    bad.write_text("{nope")
    failed = run_engram("setup", "vscode", "--config", str(bad), data_dir=data_dir, env=env)
    assert failed.returncode == 1
    assert "not valid JSON" in failed.stderr and "left untouched" in failed.stderr
    assert bad.read_text() == "{nope"
    unknown = run_engram("setup", "emacs", data_dir=data_dir, env=env)
    assert unknown.returncode == 1 and "choose one of: claude-code" in unknown.stderr


def test_protocol_command_prints_the_memory_protocol(data_dir: Path) -> None:
    done = run_engram("protocol", data_dir=data_dir)
    assert done.returncode == 0
    for needle in (
        "**What**",
        "**Learned**",
        "mem_context",
        "mem_session_summary",
        "## Next Steps",
    ):
        assert needle in done.stdout
    assert orjson.loads(run_engram("protocol", "--json", data_dir=data_dir).stdout)["protocol"]


def test_protocol_install_adds_it_once_and_updates_its_own_block(
    tmp_path: Path, data_dir: Path
) -> None:
    """`engram protocol >> CLAUDE.md` duplicated it on every run; --install is idempotent."""
    from engram.mcp.instructions import BEGIN_MARK, PROTOCOL, install

    target = tmp_path / "CLAUDE.md"
    target.write_text("# My project\n\nUse tabs.\n")
    first = run_engram("protocol", "--install", str(target), "--json", data_dir=data_dir)
    assert first.returncode == 0, first.stderr
    assert orjson.loads(first.stdout)["status"] == "added"
    text = target.read_text()
    assert text.startswith("# My project\n\nUse tabs.\n\n") and text.count(BEGIN_MARK) == 1
    again = run_engram("protocol", "--install", str(target), data_dir=data_dir)
    assert "nothing changed" in again.stdout and target.read_text() == text
    # An older block (an earlier Engram's protocol) is replaced in place, the rest kept.
    stale = text.replace(PROTOCOL.rstrip(), "old protocol text") + "\nMore notes.\n"
    assert install(stale) == ("updated", text + "\nMore notes.\n")
    # Pasted by hand before --install existed: left alone.
    assert install("notes\n" + PROTOCOL)[0] == "unchanged"
    created = tmp_path / "new" / "AGENTS.md"
    assert run_engram("protocol", "--install", str(created), data_dir=data_dir).returncode == 0
    assert created.read_text().startswith(BEGIN_MARK)


@pytest.mark.anyio
async def test_the_configured_entry_starts_a_working_server(
    tmp_path: Path, data_dir: Path, workdir: Path
) -> None:
    """What a new user gets: `engram setup claude-code`, then the agent starts that entry."""
    home = tmp_path / "home"
    home.mkdir()
    done = run_engram("setup", "claude-code", data_dir=data_dir, env=home_env(home))
    assert done.returncode == 0, done.stderr
    entry = load(home / ".claude.json")["mcpServers"]["engram"]
    command = [entry["command"], *entry["args"]]
    async with engram_mcp(data_dir, workdir, command=command) as session:
        await call(session, "mem_save", title="Configured by setup", content="it works")
        found = await call(session, "mem_search", query="configured")
        assert "Configured by setup" in found["result"]
