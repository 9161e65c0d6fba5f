"""The explorer's ASGI app: HTML pages, their JSON twins under ``/api/``, static files.

Read-only by construction: every route is a GET over :class:`~truetrain.explorer.source.Source`,
which holds no key. Every response carries a strict Content-Security-Policy (scripts only
from this origin: the one static file), and any error becomes a short 400/404/500 page or
JSON object, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from truetrain.errors import StorageError, UnknownJob

from . import disputes, flows, jobs, pages, workers

log = logging.getLogger("truetrain.explorer")
STATIC = Path(__file__).parent / "static"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"}
#: Job states the jobs list can be filtered by.
STATUSES = ("active", "completed", "cancelled", "expired")
MAX_LIST = 1000


def _int_param(text: str, what: str, *, low: int = 1, high: int = 2**64) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 20 or not low <= int(text) <= high:
        raise HTTPException(400, f"{what} must be a whole number from {low} to {high}")
    return int(text)


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _reply(request: Request, page: str, data, *, title: str, status: int = 200) -> Response:
    """The page's JSON (``/api/...``) or its HTML, from the same data."""
    version = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    block = request.app.state.source.block()
    if _is_api(request):
        return JSONResponse({"page": page, "block": block, "version": version, "data": data}, status_code=status)
    api = "/api" + request.url.path.rstrip("/") if request.url.path != "/" else "/api/jobs"
    return pages.render(page, data, title=title, api=api, block=block, version=version, status=status)


def jobs_page(request: Request) -> Response:
    status = request.query_params.get("status")
    if status is not None and status not in STATUSES:
        raise HTTPException(400, f"status must be one of {', '.join(STATUSES)}")
    limit = _int_param(request.query_params.get("limit", str(MAX_LIST)), "limit", high=MAX_LIST)
    rows = [r for r in jobs.job_list(request.app.state.source) if status is None or r["status"] == status]
    return _reply(request, "jobs", rows[:limit], title="Jobs")


def job_page(request: Request) -> Response:
    job_id = _int_param(request.path_params["job_id"], "a job id")
    try:
        data = jobs.job_detail(request.app.state.source, job_id)
    except UnknownJob:
        raise HTTPException(404, f"no job {job_id}") from None
    return _reply(request, "job", data, title=f"Job {job_id}")


def checkpoint_download(request: Request) -> Response:
    job_id = _int_param(request.path_params["job_id"], "a job id")
    try:
        cid, data = jobs.checkpoint_bytes(request.app.state.source, job_id)
    except (UnknownJob, LookupError):
        raise HTTPException(404, f"job {job_id} has no global checkpoint") from None
    except StorageError:
        raise HTTPException(502, f"the checkpoint of job {job_id} could not be fetched from IPFS") from None
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="job-{job_id}-checkpoint.ckpt"',
                             "X-Checkpoint-Cid": cid})


def workers_page(request: Request) -> Response:
    rows, meta = workers.worker_list(request.app.state.source)
    return _reply(request, "workers", {"workers": rows, **meta}, title="Workers")


def worker_page(request: Request) -> Response:
    try:
        address = workers.parse_address(request.path_params["address"])
    except ValueError:
        raise HTTPException(400, "not an Ethereum address") from None
    data = workers.worker_detail(request.app.state.source, address)
    if data is None:
        raise HTTPException(404, f"no identity {address}")
    return _reply(request, "worker", data, title=f"Worker {address}")


def disputes_page(request: Request) -> Response:
    return _reply(request, "disputes", disputes.game_list(request.app.state.source), title="Disputes")


def dispute_page(request: Request) -> Response:
    game_id = _int_param(request.path_params["game_id"], "a dispute id")
    data = disputes.game_detail(request.app.state.source, game_id)
    if data is None:
        raise HTTPException(404, f"no dispute {game_id}")
    return _reply(request, "dispute", data, title=f"Dispute {game_id}")


def flows_page(request: Request) -> Response:
    return _reply(request, "flows", flows.flows(request.app.state.source), title="Token flows")


def _error(request: Request, status: int, message: str) -> Response:
    if _is_api(request):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    return pages.error(status, message)


async def http_error(request: Request, exc: HTTPException) -> Response:
    message = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else "no such page"
    return _error(request, exc.status_code, message)


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("explorer: %s failed", request.url.path)
    return _error(request, 500, "the explorer could not read this from the chain or IPFS; see its log")


class SecurityHeaders:
    """Adds :data:`HEADERS` to every response (errors and static files included)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items() if k.lower().encode() not in names]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


def routes() -> list:
    pairs = [("/", jobs_page), ("/jobs", jobs_page), ("/jobs/{job_id}", job_page), ("/workers", workers_page),
             ("/workers/{address}", worker_page), ("/disputes", disputes_page), ("/disputes/{game_id}", dispute_page),
             ("/flows", flows_page)]
    out = [Route(path, view, methods=["GET"]) for path, view in pairs]
    out += [Route("/api" + path, view, methods=["GET"]) for path, view in pairs if path != "/"]
    out.append(Route("/jobs/{job_id}/checkpoint", checkpoint_download, methods=["GET"]))
    out.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    return out


def create_app(source, *, allowed_hosts: list[str] | None = None) -> Starlette:
    """The app over ``source``; ``allowed_hosts`` guards against DNS rebinding (None: any)."""
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    app = Starlette(routes=routes(), middleware=middleware,
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    app.state.source = source
    return app
