"""A deliberately faulty component: a loopback JSON-RPC proxy that drops every k-th request
(``every=0``: none; it still counts them, which is how the load bench counts RPC calls).

``Drop.BEFORE`` closes the connection without forwarding (the node never sees the request,
like a refused or reset connection); ``Drop.AFTER`` forwards it and then drops the answer
(the node acted, the client does not know: the hard case for ``eth_sendRawTransaction``).
"""

from __future__ import annotations

import enum
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


class Drop(enum.Enum):
    BEFORE = "before"
    AFTER = "after"


class FlakyRpcProxy:
    """``with FlakyRpcProxy(upstream, every=3) as proxy:`` then talk to ``proxy.url``."""

    def __init__(self, upstream: str, *, every: int, mode: Drop = Drop.BEFORE):
        self.upstream = upstream
        self.every = every
        self.mode = mode
        self.requests = 0
        self.dropped = 0
        self.methods: Counter[str] = Counter()  # JSON-RPC method -> requests that named it
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test and bench output quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    method = json.loads(body).get("method", "?")
                except (ValueError, AttributeError):  # not JSON, or a batch
                    method = "?"
                with proxy._lock:
                    proxy.requests += 1
                    proxy.methods[method] += 1
                    drop = proxy.every > 0 and proxy.requests % proxy.every == 0
                    proxy.dropped += drop
                if drop and proxy.mode is Drop.BEFORE:
                    self.close_connection = True
                    return
                answer = requests.post(proxy.upstream, data=body,
                                       headers={"Content-Type": "application/json"}, timeout=30)
                if drop:
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FlakyRpcProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
