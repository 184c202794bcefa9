"""Client configuration: URL normalization, the token-over-https rule, cloud.json (mode 0600,
atomic, bad files), environment overrides, the timing overrides and the backoff formula, and
`engram cloud config` through a real process."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest

from engram.errors import ValidationError
from engram.sync.cloud.autosync import Timings, backoff_delay
from engram.sync.cloud.config import (
    CloudConfigError,
    clear_cloud_config,
    load_cloud_config,
    normalize_server_url,
    save_cloud_config,
    target_for,
    token_transport_problem,
)
from tests.support import run_engram


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://Cloud.Example.com/", "https://cloud.example.com"),
        ("HTTPS://cloud.example.com:443/engram/", "https://cloud.example.com/engram"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:80/", "http://localhost"),
        ("  https://[::1]:9000  ", "https://[::1]:9000"),
    ],
)
def test_server_urls_are_normalized(raw: str, expected: str) -> None:
    assert normalize_server_url(raw) == expected
    assert target_for(normalize_server_url(raw)) == "cloud:" + expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("", "empty"),
        ("cloud.example.com", "must start with https://"),
        ("ftp://cloud.example.com", "must start with https://"),
        ("https://", "no host"),
        ("https://user:pw@cloud.example.com", "credentials"),
        ("https://cloud.example.com/?x=1", "query or fragment"),
        ("https://cloud.example.com/#top", "query or fragment"),
        ("https://cloud.example.com:99999", "invalid cloud server URL"),
    ],
)
def test_bad_server_urls_are_refused_by_name(raw: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        normalize_server_url(raw)


def test_a_token_travels_only_over_https_or_to_loopback() -> None:
    assert token_transport_problem("https://cloud.example.com", "t") is None
    assert token_transport_problem("http://127.0.0.1:8080", "t") is None
    assert token_transport_problem("http://localhost:8080", "t") is None
    assert token_transport_problem("http://[::1]:8080", "t") is None
    assert token_transport_problem("http://cloud.example.com", None) is None  # no token to leak
    assert "plain http" in (token_transport_problem("http://cloud.example.com", "t") or "")
    assert "plain http" in (token_transport_problem("http://10.0.0.5:8080", "t") or "")


def test_cloud_json_is_private_and_round_trips(tmp_path: Path) -> None:
    saved = save_cloud_config(tmp_path, "https://Cloud.Example.com/", "secret-token")
    path = tmp_path / "cloud.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert orjson.loads(path.read_bytes()) == {
        "server_url": "https://cloud.example.com",
        "token": "secret-token",
    }
    assert saved.server_url == "https://cloud.example.com" and saved.token == "secret-token"
    # Changing the server keeps the stored token unless a new one is given.
    again = save_cloud_config(tmp_path, "https://other.example.com", None)
    assert again.token == "secret-token" and again.server_url == "https://other.example.com"
    assert not list(tmp_path.glob(".cloud-*.tmp"))  # the temp file was renamed into place
    assert clear_cloud_config(tmp_path) is True
    assert clear_cloud_config(tmp_path) is False
    assert load_cloud_config(tmp_path, {}).configured is False


def test_saving_a_token_for_a_remote_http_server_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="plain http"):
        save_cloud_config(tmp_path, "http://cloud.example.com", "t")
    assert not (tmp_path / "cloud.json").exists()


def test_environment_overrides_the_file_field_by_field(tmp_path: Path) -> None:
    save_cloud_config(tmp_path, "https://file.example.com", "file-token")
    env = {"ENGRAM_CLOUD_SERVER": "https://env.example.com/"}
    cloud = load_cloud_config(tmp_path, env)
    assert cloud.server_url == "https://env.example.com"
    assert cloud.server_source == "ENGRAM_CLOUD_SERVER"
    assert (cloud.token, cloud.token_source) == ("file-token", "cloud.json")
    cloud = load_cloud_config(tmp_path, {"ENGRAM_CLOUD_TOKEN": "env-token"})
    assert (cloud.server_source, cloud.token, cloud.token_source) == (
        "cloud.json",
        "env-token",
        "ENGRAM_CLOUD_TOKEN",
    )
    assert "env-token" not in str(cloud.describe())  # status never shows the token


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"server_url": 42}', "server_url must be a string"),
        (b'{"server_url": "gopher://x"}', "must start with https://"),
    ],
)
def test_a_bad_cloud_json_is_a_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    (tmp_path / "cloud.json").write_bytes(content)
    with pytest.raises(CloudConfigError, match=problem):
        load_cloud_config(tmp_path, {})


def test_timings_come_from_the_environment() -> None:
    timings = Timings.from_env(
        {
            "ENGRAM_AUTOSYNC_DEBOUNCE_MS": "50",
            "ENGRAM_AUTOSYNC_POLL_S": "99",  # capped at the server's 30 s
            "ENGRAM_AUTOSYNC_BACKOFF_BASE_MS": "200",
            "ENGRAM_AUTOSYNC_BACKOFF_MAX_MS": "1000",
            "ENGRAM_AUTOSYNC_LEASE_S": "5",
        }
    )
    assert timings.debounce == pytest.approx(0.05) and timings.poll == 30
    assert timings.backoff_base == pytest.approx(0.2) and timings.backoff_max == pytest.approx(1)
    assert timings.lease == 5 and Timings.from_env({}) == Timings()
    with pytest.raises(CloudConfigError, match="ENGRAM_AUTOSYNC_POLL_S must be a number"):
        Timings.from_env({"ENGRAM_AUTOSYNC_POLL_S": "soon"})
    with pytest.raises(CloudConfigError, match="must not be negative"):
        Timings.from_env({"ENGRAM_AUTOSYNC_DEBOUNCE_MS": "-1"})


def test_backoff_doubles_with_jitter_and_saturates() -> None:
    assert backoff_delay(0, 1, 300) == 1
    assert backoff_delay(1, 1, 300, lambda: 0.5) == 1  # jitter 0 at the middle
    assert backoff_delay(4, 1, 300, lambda: 0.5) == 8
    assert backoff_delay(4, 1, 300, lambda: 1.0) == 10  # +25 %
    assert backoff_delay(4, 1, 300, lambda: 0.0) == 6  # -25 %
    assert backoff_delay(30, 1, 300, lambda: 1.0) == 300  # saturates at the maximum
    assert backoff_delay(30, 1, 300, lambda: 0.0) == 225
    assert backoff_delay(1, 1, 300, lambda: 0.0) == 0.75
    assert backoff_delay(1, 4, 300, lambda: 0.0) >= 2  # never below base / 2


def test_cloud_config_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shown = run_engram("cloud", "config", data_dir=home)
    assert shown.returncode == 0 and "not configured" in shown.stdout
    saved = run_engram(
        "cloud",
        "config",
        "--server",
        "https://cloud.example.com/",
        "--token",
        "-",
        data_dir=home,
        input="tok-from-stdin\n",
    )
    assert saved.returncode == 0, saved.stderr
    assert "Cloud server saved: https://cloud.example.com" in saved.stdout
    assert "tok-from-stdin" not in saved.stdout
    assert orjson.loads((home / "cloud.json").read_bytes())["token"] == "tok-from-stdin"
    as_json = run_engram("cloud", "config", "--json", data_dir=home)
    data = orjson.loads(as_json.stdout)
    assert data["server"] == "https://cloud.example.com" and data["token_configured"] is True
    refused = run_engram("cloud", "config", "--server", "http://cloud.example.com", data_dir=home)
    assert refused.returncode == 1 and "plain http" in refused.stderr
    assert orjson.loads((home / "cloud.json").read_bytes())["server_url"] == (
        "https://cloud.example.com"
    )  # nothing written
    bad = run_engram("cloud", "config", "--server", "nope", data_dir=home)
    assert bad.returncode == 1 and "must start with https://" in bad.stderr
    cleared = run_engram("cloud", "config", "--clear", data_dir=home)
    assert cleared.returncode == 0 and not (home / "cloud.json").exists()
