"""A deliberately faulty component, named as such: an HTTP proxy in front of an IPFS node's
API that flips one byte of what ``cat`` returns for the CIDs it is told to corrupt, and passes
every other request and response through untouched. Daemons pointed at it get a shard whose
bytes no longer hash to the manifest's hash (``ContentMismatch``), as from a submitter that
serves corrupt data. Loopback only; a context manager that stops its server thread."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from truetrain.chain.devnet import free_port

HOST = "127.0.0.1"
#: Response headers the proxy sets itself (it sends the whole body with its own length).
HOP_HEADERS = {"transfer-encoding", "content-length", "connection", "trailer", "x-stream-error"}


class CorruptingIpfsProxy:
    """Forward ``POST /api/v0/...`` to ``upstream_port``; flip byte ``offset`` of ``cat``'s
    body for every CID in ``targets`` (a set the test may fill after starting the proxy)."""

    def __init__(self, upstream_port: int, offset: int = 100):
        self.upstream = f"http://{HOST}:{upstream_port}"
        self.offset = offset
        self.targets: set[str] = set()
        self.corrupted = 0  # responses altered so far
        self.port = free_port()
        self._server = ThreadingHTTPServer((HOST, self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="corrupting-proxy", daemon=True)

    @property
    def api_addr(self) -> str:
        return f"/ip4/{HOST}/tcp/{self.port}"

    def __enter__(self) -> CorruptingIpfsProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _alter(self, path: str, body: bytes) -> bytes:
        url = urlsplit(path)
        if not url.path.endswith("/cat") or len(body) <= self.offset:
            return body
        if not set(parse_qs(url.query).get("arg", [])) & self.targets:
            return body
        self.corrupted += 1
        return body[: self.offset] + bytes([body[self.offset] ^ 0x01]) + body[self.offset + 1:]

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                data = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS | {"host"}}
                request = urllib.request.Request(proxy.upstream + self.path, data=data, headers=headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        status, reply, body = response.status, response.headers, response.read()
                except urllib.error.HTTPError as exc:
                    status, reply, body = exc.code, exc.headers, exc.read()
                body = proxy._alter(self.path, body)
                self.send_response(status)
                for key, value in reply.items():
                    if key.lower() not in HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> bytes:
                """The request body, sent with a length or in chunks (``add`` streams its
                multipart body chunked)."""
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    length = int(self.headers.get("Content-Length") or 0)
                    return self.rfile.read(length) if length else b""
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers, then the end
                    pass
                return b"".join(parts)

            def log_message(self, *args) -> None:  # quiet: the daemons log what they saw
                pass

        return Handler
