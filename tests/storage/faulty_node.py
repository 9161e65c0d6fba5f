"""FaultyNode: a deliberately faulty Kubo RPC server for fault-injection tests.

Like hivemind's FaultyAverager, it speaks the protocol but misbehaves in one chosen way, so
tests can show what the client does when a node lies, stalls, drops connections or is busy —
situations a well-behaved dev node never produces on its own.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Fault(enum.Enum):
    LIE = "lie"  # cat answers 200 with bytes other than the content asked for
    STALL = "stall"  # cat sends headers, then nothing, ignoring Kubo's timeout option
    ENDLESS = "endless"  # cat ignores `length` and streams without end
    DROP_FIRST = "drop_first"  # the first `drops` connections are closed without an answer
    BUSY = "busy"  # every command answers 503, as a node that is still starting


class FaultyNode:
    """Serve the given fault on 127.0.0.1; use as a context manager."""

    def __init__(self, fault: Fault, *, drops: int = 2, lie: bytes = b"not what you asked for") -> None:
        self.fault = fault
        self.drops = drops
        self.lie = lie
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_addr(self) -> str:
        return f"/ip4/127.0.0.1/tcp/{self._server.server_address[1]}"

    def __enter__(self) -> FaultyNode:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _count(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _json(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                number = node._count()
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?")[0]
                if node.fault is Fault.DROP_FIRST and number <= node.drops:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if node.fault is Fault.BUSY:
                    return self._json(503, {"Message": "dev node is starting", "Code": 0, "Type": "error"})
                if path == "/api/v0/version":
                    return self._json(200, {"Version": "0.30.0-faulty"})
                if path != "/api/v0/cat":
                    return self._json(500, {"Message": f"FaultyNode does not serve {path}", "Code": 0, "Type": "error"})
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                if node.fault is Fault.LIE:
                    self.send_header("Content-Length", str(len(node.lie)))
                    self.end_headers()
                    self.wfile.write(node.lie)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"x" * 65536
                give_up = time.monotonic() + 20  # a stalled handler must not outlive the tests
                try:
                    while time.monotonic() < give_up:
                        if node.fault is Fault.STALL:
                            time.sleep(0.1)
                            continue
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except OSError:
                    pass  # the client hung up, as it should

        return Handler
