"""``engram setup <agent>``: add Engram's MCP server to an agent's own configuration file.

Each supported client documents where it reads MCP servers from and in which shape (JSON or
TOML, under which key); :data:`AGENTS` records that. The merge is pure — text in, text out, the
user's other settings kept — and :func:`setup` does the I/O at the edge: it refuses to touch a
file it cannot parse, keeps a ``.bak`` copy of the old file, writes atomically, and changes
nothing when the entry is already there.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.errors import NotFoundError, ValidationError
from engram.files import write_atomic

SERVER_NAME = "engram"


@dataclass(frozen=True, slots=True)
class Place:
    """Where a platform keeps per-user application data (computed from the environment)."""

    home: Path
    platform: str
    env: Mapping[str, str]

    @classmethod
    def current(cls, env: Mapping[str, str] | None = None, platform: str | None = None) -> Place:
        env = os.environ if env is None else env
        home = env.get("HOME") or env.get("USERPROFILE")
        return cls(Path(home) if home else Path.home(), platform or sys.platform, env)

    def xdg_config(self) -> Path:
        raw = self.env.get("XDG_CONFIG_HOME", "").strip()
        return Path(raw) if raw else self.home / ".config"

    def app_data(self) -> Path:
        """The per-user settings directory of desktop applications on this platform."""
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support"
        if self.platform == "win32":
            raw = self.env.get("APPDATA", "").strip()
            return Path(raw) if raw else self.home / "AppData" / "Roaming"
        return self.xdg_config()


@dataclass(frozen=True, slots=True)
class Agent:
    """One MCP client: its config file, the key holding its servers, and its entry shape."""

    key: str
    name: str
    format: str  # json | toml
    container: tuple[str, ...]  # keys leading to the object of servers
    locate: Callable[[Place], Path]
    entry: Callable[[list[str]], dict[str, Any]]
    note: str = ""
    instructions: str = "AGENTS.md"  # the file the agent reads its standing instructions from
    env_key: str = "env"  # the entry's member holding environment variables
    #: the client starts servers in / or the home directory, where no project can be detected
    no_project_directory: bool = False

    def config_path(self, place: Place | None = None) -> Path:
        return self.locate(place or Place.current())


def _plain(command: list[str]) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:]}


def _stdio(command: list[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command[0], "args": command[1:]}


def _opencode(command: list[str]) -> dict[str, Any]:
    return {"type": "local", "command": list(command), "enabled": True}


def _opencode_path(place: Place) -> Path:
    directory = place.xdg_config() / "opencode"
    # opencode reads opencode.json or opencode.jsonc; edit the one the user already has.
    jsonc = directory / "opencode.jsonc"
    if not (directory / "opencode.json").exists() and jsonc.exists():
        return jsonc
    return directory / "opencode.json"


def _codex_path(place: Place) -> Path:
    raw = place.env.get("CODEX_HOME", "").strip()
    return (Path(raw) if raw else place.home / ".codex") / "config.toml"


AGENTS: dict[str, Agent] = {
    agent.key: agent
    for agent in (
        Agent(
            "claude-code",
            "Claude Code",
            "json",
            ("mcpServers",),
            lambda p: p.home / ".claude.json",
            _stdio,
            "user scope: every project; for one repository use --config .mcp.json",
            "CLAUDE.md",
        ),
        Agent(
            "claude-desktop",
            "Claude Desktop",
            "json",
            ("mcpServers",),
            lambda p: p.app_data() / "Claude" / "claude_desktop_config.json",
            _plain,
            "Claude Desktop has no project directory: set ENGRAM_PROJECT or use --project",
            "the project's instructions",
            no_project_directory=True,
        ),
        Agent("codex", "Codex", "toml", ("mcp_servers",), _codex_path, _plain),
        Agent(
            "gemini-cli",
            "Gemini CLI",
            "json",
            ("mcpServers",),
            lambda p: p.home / ".gemini" / "settings.json",
            _plain,
            instructions="GEMINI.md",
        ),
        Agent(
            "opencode",
            "OpenCode",
            "json",
            ("mcp",),
            _opencode_path,
            _opencode,
            env_key="environment",
        ),
        Agent(
            "cursor",
            "Cursor",
            "json",
            ("mcpServers",),
            lambda p: p.home / ".cursor" / "mcp.json",
            _plain,
        ),
        Agent(
            "vscode",
            "VS Code",
            "json",
            ("servers",),
            lambda p: p.app_data() / "Code" / "User" / "mcp.json",
            _stdio,
            instructions=".github/copilot-instructions.md",
        ),
    )
}
ALIASES = {
    "claude": "claude-code",
    "claude-cli": "claude-code",
    "gemini": "gemini-cli",
    "vs-code": "vscode",
    "code": "vscode",
    "open-code": "opencode",
}


def find_agent(name: str) -> Agent:
    key = name.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key not in AGENTS:
        raise NotFoundError(f"unknown agent {name!r}; choose one of: {', '.join(AGENTS)}")
    return AGENTS[key]


def server_command(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """How a client starts ``engram mcp`` from any directory: the absolute path of the running
    ``engram`` script, else this interpreter with ``-m engram``.

    Paths are made absolute but symlinks are kept: a virtualenv's python is a symlink whose
    own location is what selects the virtualenv.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    if Path(argv0).stem == "engram":
        found = argv0 if os.sep in argv0 else shutil.which(argv0)
        if found and os.path.isfile(found):
            return [os.path.abspath(found), "mcp"]
    return [os.path.abspath(executable or sys.executable), "-m", "engram", "mcp"]


# --- pure merging ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merge:
    """What adding the entry to a file's text does: ``added``, ``updated`` or ``unchanged``
    (then ``text`` is ``None``: nothing to write)."""

    status: str
    text: str | None


class ConfigFileError(ValidationError):
    """A config file that cannot be read safely; it is never written."""


def _descend(node: Any, container: tuple[str, ...], where: str, new_table: Callable[[], Any]):
    for key in container:
        child = node.get(key)
        if child is None:
            node[key] = new_table()
            child = node[key]  # tomlkit hands back its own container for the new table
        elif not isinstance(child, dict):
            raise ConfigFileError(f'{where}: "{key}" is not an object, so no server can be added')
        node = child
    return node


def _merge_into(node: Any, entry: dict[str, Any], new_table: Callable[[], Any]) -> str:
    """Put ``entry`` under :data:`SERVER_NAME` in ``node`` (keeping keys the user added)."""
    current = node.get(SERVER_NAME)
    if isinstance(current, dict) and all(current.get(k) == v for k, v in entry.items()):
        return "unchanged"
    if isinstance(current, dict):
        for key, value in entry.items():
            current[key] = value
        return "updated"
    table = new_table()
    table.update(entry)
    node[SERVER_NAME] = table
    return "added" if current is None else "updated"


def merge_json(text: str | None, container: tuple[str, ...], entry: dict[str, Any]) -> Merge:
    """Add the server entry to a JSON or JSONC config's text, keeping everything else — comments,
    trailing commas and layout included (only the entry's own text is rewritten)."""
    from engram import jsonc

    if text is None or not text.strip():
        data: dict[str, Any] = {}
        _merge_into(_descend(data, container, "JSON", dict), entry, dict)
        return Merge("added", orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    try:
        data = jsonc.loads(text)
    except jsonc.JsoncError as exc:
        raise ConfigFileError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigFileError("the top level is not a JSON object")
    node = _descend(data, container, "JSON", dict)
    status = _merge_into(node, entry, dict)
    if status == "unchanged":
        return Merge(status, None)
    return Merge(status, jsonc.set_member(text, (*container, SERVER_NAME), node[SERVER_NAME]))


def merge_toml(text: str | None, container: tuple[str, ...], entry: dict[str, Any]) -> Merge:
    """Add the server entry to a TOML config's text, keeping comments and layout."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise ConfigFileError(f"not valid TOML ({exc})") from None
    node = _descend(doc, container, "TOML", lambda: tomlkit.table(is_super_table=True))
    status = _merge_into(node, entry, tomlkit.table)
    if status == "unchanged":
        return Merge(status, None)
    return Merge(status, tomlkit.dumps(doc))


def entry(agent: Agent, command: list[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The agent's server entry for ``command``, with ``env`` under the agent's own key."""
    value = agent.entry(command)
    if env:
        value[agent.env_key] = dict(env)
    return value


def merge(
    agent: Agent, text: str | None, command: list[str], env: Mapping[str, str] | None = None
) -> Merge:
    merge_text = merge_toml if agent.format == "toml" else merge_json
    return merge_text(text, agent.container, entry(agent, command, env))


def snippet(agent: Agent, command: list[str], env: Mapping[str, str] | None = None) -> str:
    """The entry as it appears in an otherwise empty config file of that agent."""
    text = merge(agent, None, command, env).text
    assert text is not None
    return text


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (from ``--env``) as a dict; a pair without ``=`` is refused."""
    env: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValidationError(f"--env expects KEY=VALUE, got {pair!r}", field="env")
        env[name.strip()] = value
    return env


# --- the edge: files ------------------------------------------------------------------------


@dataclass(slots=True)
class SetupResult:
    agent: Agent
    path: Path
    status: str  # added | updated | already_configured | printed
    snippet: str
    backup: Path | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent.key,
            "path": str(self.path),
            "status": self.status,
            "backup": str(self.backup) if self.backup else None,
            "snippet": self.snippet,
            "warnings": self.warnings,
        }

    def message(self) -> str:
        name, path = self.agent.name, self.path
        if self.status == "printed":
            head = [f"# {name}: add this to {path}", *(f"# Warning: {w}" for w in self.warnings)]
            return "\n".join([*head, self.snippet])
        if self.status == "already_configured":
            lines = [f"{name} is already configured in {path}; nothing changed."]
        else:
            verb = "Added" if self.status == "added" else "Updated"
            lines = [f"{verb} the engram MCP server in {path}"]
            if self.backup:
                lines.append(f"Previous file kept as {self.backup}")
            lines.append(f"Restart {name}, then ask it to call mem_current_project.")
        lines.extend(f"Warning: {w}" for w in self.warnings)
        if self.agent.note and not self.warnings:
            lines.append(f"Note: {self.agent.note}.")
        lines.append(
            "Teach the agent when to save and search: add the output of 'engram protocol' to "
            f"{self.agent.instructions}."
        )
        return "\n".join(lines)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path} is not UTF-8 text; it was left untouched") from None


def setup(
    agent_name: str,
    *,
    config: str | Path | None = None,
    print_only: bool = False,
    command: list[str] | None = None,
    place: Place | None = None,
    project: str | None = None,
    env: Mapping[str, str] | None = None,
) -> SetupResult:
    """Add (or with ``print_only`` show) Engram's server entry in the agent's config file.

    ``project`` pins the server to a project (``engram mcp --project P``), for clients that start
    servers where no project can be detected; ``env`` adds environment variables to the entry.
    Idempotent; a file that does not parse is left untouched and reported; the previous file is
    kept as ``<file>.bak``.
    """
    agent = find_agent(agent_name)
    command = list(command or server_command())
    if project:
        from engram.project import project_name

        command += ["--project", project_name(project)]
    env = dict(env or {})
    warnings = []
    if agent.no_project_directory and not project and "ENGRAM_PROJECT" not in env:
        warnings.append(
            f"{agent.name} starts MCP servers in / or your home directory, where Engram would "
            "guess the project from that directory's name; pass --project NAME (or --env "
            "ENGRAM_PROJECT=NAME) so memories land in the right project"
        )
    path = Path(config).expanduser() if config else agent.config_path(place)
    text_of_snippet = snippet(agent, command, env)
    if print_only:
        return SetupResult(agent, path, "printed", text_of_snippet, warnings=warnings)
    # A symlinked config (dotfile managers) is edited where it really lives.
    target = path.resolve() if path.is_symlink() else path
    old = _read(target)
    try:
        result = merge(agent, old, command, env)
    except ConfigFileError as exc:
        raise ConfigFileError(
            f"{path}: {exc}; it was left untouched. Fix it, or run 'engram setup "
            f"{agent.key} --print' and add the entry by hand."
        ) from None
    if result.text is None:
        return SetupResult(agent, path, "already_configured", text_of_snippet, warnings=warnings)
    backup = None
    if old is not None:
        backup = target.with_name(target.name + ".bak")
        shutil.copy2(target, backup)
    write_atomic(target, result.text.encode("utf-8"))
    return SetupResult(agent, path, result.status, text_of_snippet, backup, warnings)


def status(agent: Agent, place: Place | None = None, command: list[str] | None = None) -> str:
    """How the agent's config file stands, for ``engram setup`` without an agent."""
    path = agent.config_path(place)
    try:
        text = _read(path)
        if text is None:
            return "no config file"
        outcome = merge(agent, text, command or server_command()).status
    except (ConfigFileError, OSError):
        return "unreadable"
    return {
        "unchanged": "configured",
        "updated": "configured with another command",
        "added": "not configured",
    }[outcome]
