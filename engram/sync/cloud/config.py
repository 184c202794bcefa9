"""Where this machine's cloud server is and how it authenticates: ``cloud.json`` in the data
directory (owner-only permissions), overridden by ``ENGRAM_CLOUD_SERVER`` / ``ENGRAM_CLOUD_TOKEN``.

A server URL is normalized once (scheme and host lower-cased, default port and trailing ``/``
dropped; no query, fragment or credentials), and the same text names the delivery target of
that server in the journal: ``cloud:<normalized url>``. A bearer token only ever travels over
https, except to a loopback address (a server on this machine).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from engram import settings
from engram.errors import EngramError, ValidationError
from engram.files import write_atomic

CONFIG_FILE = "cloud.json"
SERVER_ENV = "ENGRAM_CLOUD_SERVER"
TOKEN_ENV = "ENGRAM_CLOUD_TOKEN"
TARGET_PREFIX = "cloud:"


class CloudConfigError(EngramError):
    """``cloud.json`` or the cloud environment variables cannot be used (reason
    ``cloud_config_error``)."""

    status_code = 400
    reason_code = "cloud_config_error"


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_server_url(raw: str) -> str:
    """The canonical form of a server URL, or :class:`ValidationError` saying what is wrong."""
    text = (raw or "").strip()
    if not text:
        raise ValidationError("the cloud server URL is empty", field="server")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"invalid cloud server URL {text!r}: {exc}", field="server") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValidationError(
            f"the cloud server URL must start with https:// (or http:// for a local server), "
            f"got {text!r}",
            field="server",
        )
    if not parts.hostname:
        raise ValidationError(f"the cloud server URL {text!r} has no host", field="server")
    if parts.username or parts.password:
        raise ValidationError(
            "the cloud server URL must not contain credentials: use --token", field="server"
        )
    if parts.query or parts.fragment:
        raise ValidationError(
            f"the cloud server URL must not have a query or fragment, got {text!r}",
            field="server",
        )
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = 443 if scheme == "https" else 80
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{netloc}{path}"


def target_for(server_url: str) -> str:
    """The journal delivery target of a (normalized) server: ``cloud:<url>``."""
    return TARGET_PREFIX + server_url


def token_transport_problem(server_url: str, token: str | None) -> str | None:
    """Why ``token`` must not be sent to ``server_url`` (None when it may)."""
    if not token:
        return None
    parts = urlsplit(server_url)
    if parts.scheme == "https" or is_loopback_host(parts.hostname or ""):
        return None
    return (
        f"refusing to send the cloud token over plain http to {parts.hostname}: "
        "use an https:// server URL (http is only allowed for a server on this machine)"
    )


@dataclass(frozen=True, slots=True)
class CloudConfig:
    """The effective client configuration and where each part came from."""

    server_url: str | None = None
    token: str | None = None
    server_source: str | None = None  # "ENGRAM_CLOUD_SERVER" | "cloud.json"
    token_source: str | None = None  # "ENGRAM_CLOUD_TOKEN" | "cloud.json"
    path: Path | None = None  # the cloud.json file

    @property
    def configured(self) -> bool:
        return bool(self.server_url)

    @property
    def target(self) -> str:
        if not self.server_url:
            raise CloudConfigError(
                "cloud sync is not configured: run 'engram cloud config --server URL'"
            )
        return target_for(self.server_url)

    def problem(self) -> str | None:
        """A configuration that cannot be used as it is (None when it is fine or absent)."""
        if not self.server_url:
            return None
        return token_transport_problem(self.server_url, self.token)

    def require(self) -> CloudConfig:
        """Self, or :class:`CloudConfigError` if the cloud is not configured or unusable."""
        if not self.server_url:
            raise CloudConfigError(
                "cloud sync is not configured: run 'engram cloud config --server URL' "
                f"(or set {SERVER_ENV})"
            )
        problem = self.problem()
        if problem:
            raise CloudConfigError(problem)
        return self

    def describe(self) -> dict[str, object]:
        """What status output shows (never the token itself)."""
        return {
            "server": self.server_url,
            "server_source": self.server_source,
            "token_configured": bool(self.token),
            "token_source": self.token_source,
            "config_file": str(self.path) if self.path else None,
        }


def config_path(data_dir: Path) -> Path:
    return data_dir / CONFIG_FILE


def read_file(path: Path) -> dict[str, str]:
    """The stored settings (empty when the file does not exist)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CloudConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise CloudConfigError(
            f"{path} is not valid JSON ({exc}); fix it or run 'engram cloud config --clear'"
        ) from None
    if not isinstance(doc, dict):
        raise CloudConfigError(f"{path} must hold a JSON object")
    found: dict[str, str] = {}
    for name in ("server_url", "token"):
        value = doc.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise CloudConfigError(f"{path}: {name} must be a string")
        found[name] = value
    return found


def load_cloud_config(data_dir: Path, env: Mapping[str, str] | None = None) -> CloudConfig:
    """The effective configuration: the environment overrides ``cloud.json`` field by field."""
    env = os.environ if env is None else env
    path = config_path(data_dir)
    stored = read_file(path)
    server_raw, server_source = settings.raw(SERVER_ENV, env), SERVER_ENV
    if not server_raw:
        server_raw, server_source = stored.get("server_url", "").strip(), "cloud.json"
    token, token_source = settings.raw(TOKEN_ENV, env), TOKEN_ENV
    if not token:
        token, token_source = stored.get("token", "").strip(), "cloud.json"
    server = None
    if server_raw:
        try:
            server = normalize_server_url(server_raw)
        except ValidationError as exc:
            raise CloudConfigError(f"{server_source}: {exc}") from None
    return CloudConfig(
        server_url=server,
        token=token or None,
        server_source=server_source if server else None,
        token_source=token_source if token else None,
        path=path,
    )


def save_cloud_config(data_dir: Path, server: str, token: str | None = None) -> CloudConfig:
    """Store ``server`` (and ``token``, or keep the stored one when None) in ``cloud.json``.

    Refuses a token that would travel over plain http to another machine."""
    url = normalize_server_url(server)
    path = config_path(data_dir)
    stored = read_file(path)
    if token is not None:
        token = token.strip()
        if not token:
            raise ValidationError("the token is empty", field="token")
        stored["token"] = token
    stored["server_url"] = url
    problem = token_transport_problem(url, stored.get("token"))
    if problem:
        raise ValidationError(problem, field="server")
    try:
        write_atomic(path, orjson.dumps(stored, option=orjson.OPT_INDENT_2) + b"\n", mode=0o600)
    except OSError as exc:
        raise CloudConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return load_cloud_config(data_dir, {})


def clear_cloud_config(data_dir: Path) -> bool:
    """Remove ``cloud.json``; whether there was one."""
    path = config_path(data_dir)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CloudConfigError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return True
