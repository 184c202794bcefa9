"""How the client reads every kind of answer — from a tiny real HTTP server that answers what a
test tells it to (an engram server's envelopes, a web server that is not one, redirects,
garbage) — and that each becomes one reason code with a message that says what to do."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest
import zstandard

from engram.sync.cloud.client import CloudClient, CloudError
from engram.sync.cloud.config import CloudConfig
from tests.support import run_engram
from tests.support.sync_cloud import cloud_config


class Canned:
    """Answers every request with ``(status, headers, body)``; remembers what it received."""

    def __init__(self) -> None:
        self.answer: tuple[int, dict[str, str], bytes] = (200, {}, b"{}")
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                canned.received.append((self.command, self.path, dict(self.headers), body))
                status, headers, data = canned.answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def envelope(self, status: int, error_class: str, code: str, message: str, **extra) -> None:
        body = {"error_class": error_class, "error_code": code, "error": message, **extra}
        self.answer = (status, {"Content-Type": "application/json"}, orjson.dumps(body))


@pytest.fixture
def canned() -> Iterator[Canned]:
    server = Canned()
    yield server
    server.server.shutdown()
    server.server.server_close()


def push_error(canned: Canned, token: str | None = "t") -> CloudError:
    with CloudClient(cloud_config(canned.url, token)) as client, pytest.raises(CloudError) as err:
        client.push(['{"mid": "x"}'], created_by="me", project="acme")
    return err.value


@pytest.mark.parametrize(
    ("status", "error_class", "code", "reason", "hint"),
    [
        (401, "policy", "auth_required", "auth_required", "check the token"),
        (403, "policy", "policy_forbidden", "policy_forbidden", "ENGRAM_CLOUD_ALLOWED_PROJECTS"),
        (409, "policy", "sync-paused", "paused", "pulls still work"),
        (413, "repairable", "upgrade_repairable_payload_too_large", "payload_too_large", ""),
        (500, "blocked", "upgrade_blocked_internal", "transport_failed", ""),
        (503, "blocked", "database_unavailable", "transport_failed", ""),
        (400, "invalid_request", "payload_invalid", "transport_failed", ""),
    ],
)
def test_envelopes_map_to_reason_codes(
    canned: Canned, status: int, error_class: str, code: str, reason: str, hint: str
) -> None:
    canned.envelope(status, error_class, code, f"the server says {code}")
    error = push_error(canned)
    assert error.reason_code == reason and error.status == status
    assert error.error_code == code and error.error_class == error_class
    assert f"server answered {status}: the server says {code}" in str(error)
    assert hint in str(error)


def test_a_403_names_the_forbidden_projects(canned: Canned) -> None:
    canned.envelope(403, "policy", "policy_forbidden", "forbidden", projects=["widgets"])
    with CloudClient(cloud_config(canned.url)) as client, pytest.raises(CloudError) as caught:
        client.pull(0, ["acme", "widgets"])
    assert caught.value.projects == ["widgets"]


def test_a_server_without_the_mutation_routes(canned: Canned) -> None:
    canned.answer = (404, {"Content-Type": "text/html"}, b"<h1>Not Found</h1>")
    error = push_error(canned)
    assert error.reason_code == "transport_failed" and error.error_code == "server_unsupported"
    assert "deploy a newer engram cloud server" in str(error)


def test_not_json_redirects_and_unreachable(canned: Canned) -> None:
    canned.answer = (200, {"Content-Type": "text/html"}, b"<html>a web page</html>")
    error = push_error(canned)
    assert error.reason_code == "transport_failed" and "is not JSON" in str(error)
    canned.answer = (200, {}, b"[1, 2]")
    assert "no 'accepted' list" in str(push_error(canned))
    canned.answer = (302, {"Location": "https://elsewhere.example.com/sync"}, b"")
    error = push_error(canned)
    assert "redirected to https://elsewhere.example.com/sync" in str(error)
    assert len(canned.received) == 3  # the redirect was not followed
    gone = CloudConfig(server_url="http://127.0.0.1:9", token=None)
    with CloudClient(gone) as client, pytest.raises(CloudError) as caught:
        client.health()
    assert caught.value.reason_code == "transport_failed" and "cannot reach" in str(caught.value)


def test_requests_carry_the_token_and_compress_large_bodies(canned: Canned) -> None:
    canned.answer = (200, {}, orjson.dumps({"accepted": [], "rejected": [], "latest_seq": 0}))
    records = [orjson.dumps({"mid": f"{i:032x}", "pad": "x" * 100}).decode() for i in range(30)]
    with CloudClient(cloud_config(canned.url, "sekrit")) as client:
        client.push(records, created_by="me")
        client.push(records[:1], created_by="me")
    (_, path, headers, body), (_, _, small_headers, small_body) = canned.received
    assert path == "/sync/mutations/push" and headers["Authorization"] == "Bearer sekrit"
    assert headers["Content-Encoding"] == "zstd"
    sent = orjson.loads(zstandard.ZstdDecompressor().decompress(body))
    assert sent == {"created_by": "me", "mutations": [orjson.loads(r) for r in records]}
    assert "Content-Encoding" not in small_headers and orjson.loads(small_body)["mutations"]
    with CloudClient(cloud_config(canned.url, None)) as client:
        client.push(records[:1], created_by="me")
    assert "Authorization" not in canned.received[-1][2]


def test_bad_project_names_and_usage(tmp_path: Path) -> None:
    home = tmp_path / "home"
    empty = run_engram("cloud", "enroll", "  ", data_dir=home)
    assert empty.returncode == 1 and "a project name is required" in empty.stderr
    missing = run_engram("cloud", "upgrade", "doctor", data_dir=home)
    assert missing.returncode == 2 and "--project" in missing.stderr
    normalized = run_engram("cloud", "enroll", "My--Project", "--json", data_dir=home)
    assert orjson.loads(normalized.stdout)["project"] == "my-project"
    unenrolled = run_engram("cloud", "unenroll", "nothing-here", data_dir=home)
    assert unenrolled.returncode == 0 and "was not enrolled" in unenrolled.stdout
