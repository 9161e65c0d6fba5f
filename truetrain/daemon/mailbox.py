"""Where the stages of a pipelined task find each other's messages (issue 17).

A stage sends each activation or gradient by adding its bytes to IPFS and posting a
**record** (the message's place, keccak256 address and CID, ``pipeline.transport``). On the
market the records travel worker to worker: each worker daemon serves the records its own
stages posted from a small HTTP **mailbox**, and a stage waiting for a message asks the
mailbox of the worker that holds the sending stage, found from the chain (the sibling
task's worker) and that worker's published profile (``HardwareProfile.mailbox``). A stage
redrawn to another worker is found there on the next poll.

Nothing in a record is trusted: the CID is where to look and the bytes are checked against
the address before use; the address is what the *sender* serves as sent, and what it
commits to in its own log, so a receiver logs exactly the sender's word. Only the sender's
own mailbox serves its records, so nobody else can post in its name.

A GET may wait for its record (``?wait_ms=N``, at most ``MAX_WAIT_MS``): the server
answers the moment it is posted, so a step's dozen hops cost milliseconds, not polling
intervals (30 steps of the demo LM in 3 stages took over a minute with 250 ms polls).

Records are kept per **attempt** of a stage (``space``: the task group and the block its
stage was offered in, so a stage redrawn after a failure never reads or serves the records
of an earlier attempt) until the worker drops them, and served with GET
``/v1/board/{space}/{name}``: 200 with the JSON, 404 before it is posted.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from truetrain.errors import PipelineError
from truetrain.training.pipeline.transport import poll

log = logging.getLogger("truetrain.daemon")

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,95}$")
#: The longest a GET waits server-side for a record to be posted.
MAX_WAIT_MS = 2_000


class Mailbox:
    """The records this worker's stages posted, served over HTTP on ``host``:``port`` (0: any free port)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._records: dict[tuple[str, str], bytes] = {}
        self._posted = threading.Condition()
        records, posted = self._records, self._posted

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                path, _, query = self.path.partition("?")
                parts = path.split("/")
                if len(parts) != 5 or parts[:3] != ["", "v1", "board"] or not all(map(_NAME.match, parts[3:])):
                    return self._reply(404, b'{"error": "no such record"}')
                wait_ms = 0
                if query.startswith("wait_ms=") and query[8:].isdigit():
                    wait_ms = min(int(query[8:]), MAX_WAIT_MS)
                key = (parts[3], parts[4])
                with posted:
                    posted.wait_for(lambda: key in records, timeout=wait_ms / 1000)
                    body = records.get(key)
                self._reply(200, body) if body is not None else self._reply(404, b'{"error": "not posted"}')

            def _reply(self, status: int, body: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="mailbox", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def put(self, space: str, name: str, record: dict) -> None:
        if not (_NAME.match(space) and _NAME.match(name)):
            raise PipelineError(f"bad mailbox record name {space}/{name}")
        with self._posted:
            self._records[(space, name)] = json.dumps(record, sort_keys=True).encode()
            self._posted.notify_all()

    def drop(self, space: str) -> None:
        """Forget a group's records (its task is over for this worker)."""
        with self._posted:
            for key in [k for k in self._records if k[0] == space]:
                del self._records[key]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stage_space(job_id: int, round_index: int, group: int, offered_block: int) -> str:
    """The mailbox space of one attempt at a stage: its group (the stages of one data shard
    in one round) and the block its task was offered in."""
    return f"job{job_id}-r{round_index}-g{group}-o{offered_block}"


def record_source(name: str) -> int:
    """The sending stage of a message record (``msg-{step}-{kind}-{micro}-{source}``)."""
    try:
        return int(name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        raise PipelineError(f"not a message record: {name!r}") from None


class StageBoard:
    """The board one stage runs on: posts go to this worker's ``mailbox`` under ``space``;
    a wait polls the mailbox of the worker holding the sending stage now, ``resolve(stage)``
    (its URL and that attempt's space, or None while nobody holds it), until the record is
    there or ``timeout_s``."""

    def __init__(self, mailbox: Mailbox, space: str, resolve: Callable[[int], tuple[str, str] | None], *,
                 poll_s: float = 0.02, max_poll_s: float = 0.25, request_timeout_s: float = 5.0,
                 long_poll_ms: int = 1_000, abandoned: Callable[[], bool] = lambda: False):
        self.long_poll_ms = long_poll_ms
        self.mailbox, self.space, self.resolve, self.abandoned = mailbox, space, resolve, abandoned
        self.poll_s, self.max_poll_s, self.request_timeout_s = poll_s, max_poll_s, request_timeout_s
        self.session = requests.Session()

    def post(self, name: str, record: dict) -> None:
        self.mailbox.put(self.space, name, record)

    def read(self, name: str, wait_ms: int = 0) -> dict | None:
        """The record, asking the sender's mailbox to hold the request up to ``wait_ms`` for it."""
        where = self.resolve(record_source(name))
        if where is None:
            return None
        url, space = where
        try:
            reply = self.session.get(f"{url}/v1/board/{space}/{name}", params={"wait_ms": wait_ms} if wait_ms else None,
                                     timeout=self.request_timeout_s + wait_ms / 1000)
        except requests.RequestException:
            return None  # that worker is down or gone: its stage will be redrawn, ask again
        if reply.status_code != 200:
            return None
        try:
            record = reply.json()
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def wait(self, name: str, timeout_s: float, what: str) -> dict:
        def abandoned() -> str | None:
            return f"stopped waiting for {what}: the task is no longer this worker's" if self.abandoned() else None

        return poll(lambda: self.read(name, self.long_poll_ms), timeout_s, what, give_up=abandoned,
                    first_pause_s=self.poll_s, max_pause_s=self.max_poll_s)
