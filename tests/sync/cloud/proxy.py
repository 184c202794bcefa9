"""A small real HTTP proxy for fault tests: it forwards every request byte for byte to the real
cloud server (compression and all) and, when told to, answers 500 instead, answers 500 *after*
the server handled the request (the server committed, the client never heard), stalls until the
client gives up, or drops the connection.

It is a network component between two real processes, not a stand-in for the server.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
MODES = ("pass", "error", "error_after", "stall", "drop")


class FaultProxy:
    """``with FaultProxy(server_port) as proxy: proxy.url …; proxy.mode = "error"``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode = "pass"
        self.only: tuple[str, ...] = ()  # path prefixes the fault applies to (empty: all)
        self.stall_s = 30.0
        self.delay_s = 0.0  # every forwarded request waits this long first
        #: Requests to these path prefixes wait (counted in flight) until :meth:`release`.
        self.held: tuple[str, ...] = ()
        self._released = threading.Event()
        self._in_flight: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, mode: str, *, only: tuple[str, ...] = ()) -> None:
        assert mode in MODES, mode
        with self._lock:
            self.mode, self.only = mode, only

    def hold(self, *paths: str) -> None:
        """Keep requests to ``paths`` (prefixes) in flight until :meth:`release`."""
        self._released.clear()
        self.held = paths

    def release(self) -> None:
        self._released.set()

    def in_flight(self, path: str) -> int:
        """Requests to ``path`` forwarded and not answered yet."""
        with self._lock:
            return self._in_flight[path]

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- one request --------------------------------------------------------------------------

    def _fault_for(self, path: str) -> str:
        with self._lock:
            if self.mode == "pass":
                return "pass"
            if self.only and not path.startswith(self.only):
                return "pass"
            return self.mode

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        with self._lock:
            self.requests[path] += 1
        fault = self._fault_for(path)
        if fault != "pass":
            with self._lock:
                self.faults[f"{fault} {path}"] += 1
        if fault == "drop":
            handler.close_connection = True
            handler.connection.close()
            return
        if fault == "stall":
            time.sleep(self.stall_s)
            handler.close_connection = True
            return
        if fault == "error":
            self._reply(handler, 500, [("Content-Type", "text/plain")], b"injected failure")
            return
        with self._lock:
            self._in_flight[path] += 1
        try:
            if self.held and path.startswith(self.held):
                self._released.wait(60)
            if self.delay_s:
                time.sleep(self.delay_s)
            status, headers, data = self._forward(handler, body)
        finally:
            with self._lock:
                self._in_flight[path] -= 1
        if fault == "error_after":
            self._reply(handler, 500, [("Content-Type", "text/plain")], b"injected failure")
            return
        self._reply(handler, status, headers, data)

    def _forward(
        self, handler: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            data = response.read()
            kept = [
                (k, v)
                for k, v in response.getheaders()
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"
            ]
            return response.status, kept, data
        except OSError as exc:
            return 502, [("Content-Type", "text/plain")], f"proxy: upstream failed: {exc}".encode()
        finally:
            conn.close()

    @staticmethod
    def _reply(
        handler: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]], data: bytes
    ) -> None:
        try:
            handler.send_response(status)
            for name, value in headers:
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            handler.close_connection = True
