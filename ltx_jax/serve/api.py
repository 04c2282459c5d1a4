"""The HTTP routes of `ltx-jax serve` (FastAPI): the OpenAI videos API, `/health`, `/v1/models` and the page at `/`.

    POST   /v1/videos               a job (JSON, or a form: multipart with the image `input_reference`), at once
    POST   /v1/videos/sync          the same, waited for: the mp4
    GET    /v1/videos               every job, newest first
    GET    /v1/videos/{id}          one job: queued, in_progress (progress: % of steps), completed, failed, cancelled
    GET    /v1/videos/{id}/content  the mp4 of a completed job
    DELETE /v1/videos/{id}          cancels a queued or running job (between denoising steps); removes a finished one

Every error is OpenAI's `{"error": {"message", "type", "param", "code"}}`. With an API key, every route wants it:
`Authorization: Bearer KEY`, or the cookie the page sets once opened as `/?key=KEY` (so that the page's requests
and its <video> elements carry it), compared in constant time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import importlib.resources
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from ltx_jax.pipeline.ltx_pipeline import LTXPipeline
from ltx_jax.serve.jobs import Job, JobStore
from ltx_jax.serve.peers import Leader
from ltx_jax.serve.schema import FINISHED, ModelCard, ModelList, VideoDeleted, VideoJob, VideoList, VideoRequest
from ltx_jax.serve.settings import DEFAULT_LIMITS, Limits, MiB, RequestError, Served, check_servable, checker
from ltx_jax.serve.worker import Worker

KEY_COOKIE = "ltx_jax_key"
FORM_ALLOWANCE = 64 * 1024  # bytes of a body besides the image: the other fields and the multipart framing
CANCEL_WAIT_S = 120.0  # DELETE waits this long for a running job to reach its next step (a forward, or decoding)
WAIT_POLL_S = 0.02  # how often a waiting request looks at its job: within 2% of a 1 s job
STOP_WAIT_S = 600.0  # at shutdown, for the running job to stop
MAX_QUOTED = 80  # characters of a refused value quoted back
_SUFFIX = re.compile(r"\.[a-z0-9]{1,8}")


@dataclasses.dataclass(frozen=True)
class Server:
    """What the routes use: the jobs, the thread running them, what is served and its description."""

    store: JobStore
    worker: Worker
    served: Served
    max_upload_bytes: int
    description: str
    api_key: str | None = None

    @classmethod
    def of(
        cls,
        pipeline: LTXPipeline,
        jobs_dir: Path,
        *,
        model: str,
        limits: Limits = DEFAULT_LIMITS,
        api_key: str | None = None,
        peers: Leader | None = None,
    ) -> Server:
        """The server of `pipeline` (its flow, its defaults), its jobs in `jobs_dir` (reopened where it holds some);
        `peers`: under `jax.distributed`, on process 0, the other processes, which run every job too."""
        if api_key == "":
            raise ValueError("api_key is empty: give a key (e.g. from `openssl rand -hex 16`), or None for no key.")
        check_servable(pipeline.flow)
        served = Served(model, pipeline.flow, pipeline.defaults)
        store = JobStore(jobs_dir, checker(served, limits), max_queue=limits.max_queue)
        worker = Worker(pipeline, store, peers)
        return cls(store, worker, served, limits.max_upload_bytes, pipeline.description, api_key)


def create_app(server: Server) -> FastAPI:
    """The ASGI app; its lifespan starts the worker and, at shutdown, stops the running job (failed: submit it
    again) and leaves the queued ones on disk for the next start."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        server.worker.start()
        yield
        await anyio.to_thread.run_sync(server.worker.stop, STOP_WAIT_S)

    app = FastAPI(title="ltx-jax serve", lifespan=lifespan, dependencies=[Depends(_authorized)])
    app.state.server = server
    app.include_router(router)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)  # FastAPI's and the router's own (404, 405)
    return app


def _server(request: Request) -> Server:
    return request.app.state.server


ServerDep = Annotated[Server, Depends(_server)]


def _authorized(request: Request) -> None:
    key = _server(request).api_key
    if key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    given = token if scheme.lower() == "bearer" else request.cookies.get(KEY_COOKIE)
    if request.url.path == "/" and "key" in request.query_params:
        given = request.query_params["key"]
    if given is None or not hmac.compare_digest(given.encode(), key.encode()):
        raise HTTPException(
            401, "This server wants its API key: 'Authorization: Bearer KEY' (the page: open /?key=KEY).",
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip


router = APIRouter()


@router.get("/", response_class=HTMLResponse, response_model=None)
def page(request: Request) -> HTMLResponse | RedirectResponse:
    """The page; opened as /?key=KEY (checked by `_authorized`), a cookie with the key that the page's requests and
    videos carry, and a redirect to / that takes the key out of the address bar."""
    key = _server(request).api_key
    if key is not None and "key" in request.query_params:
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict")
        return response
    return HTMLResponse(importlib.resources.files("ltx_jax.serve").joinpath("index.html").read_text(encoding="utf-8"))


@router.get("/health", response_model=None)
def health(server: ServerDep) -> dict[str, str] | JSONResponse:
    """200 while jobs can run; 503 once the worker thread has died (the log says why)."""
    error = server.worker.error
    if error is not None:
        message = f"The worker stopped ({type(error).__name__}: {error}); no job runs. Restart the server."
        return _error_response(503, message, code="worker_stopped")
    return {"status": "ok"}


@router.get("/v1/models")
def models(server: ServerDep) -> ModelList:
    card = ModelCard(id=server.served.model, created=0, flow=server.served.flow.name, description=server.description)
    return ModelList(data=[card])


@router.post("/v1/videos")
async def create_video(request: Request, server: ServerDep) -> VideoJob:
    fields, image = await _request_of(request, server.max_upload_bytes)
    job = await anyio.to_thread.run_sync(server.store.submit, fields, image)
    return _video(job, server)


@router.post("/v1/videos/sync", response_model=None)
async def create_video_and_wait(request: Request, server: ServerDep) -> FileResponse | JSONResponse:
    """The job's mp4 once completed (its id in the X-Video-Id header); a failed job is a 500 with its error, a
    cancelled one a 409. A client that leaves does not cancel it (DELETE does)."""
    fields, image = await _request_of(request, server.max_upload_bytes)
    job = await anyio.to_thread.run_sync(server.store.submit, fields, image)
    job = await _finished(server.store, job.id)
    if job.status == "completed":
        return FileResponse(server.store.video_path(job.id), media_type="video/mp4", headers={"X-Video-Id": job.id})
    error = job.error or {"code": "cancelled", "message": f"Job {job.id} was cancelled."}
    return _error_response(500 if job.status == "failed" else 409, error["message"], code=error["code"])


@router.get("/v1/videos")
def list_videos(server: ServerDep) -> VideoList:
    return VideoList(data=[_video(job, server) for job in server.store.jobs()])


@router.get("/v1/videos/{video_id}")
def get_video(video_id: str, server: ServerDep) -> VideoJob:
    return _video(_job(server, video_id), server)


@router.get("/v1/videos/{video_id}/content", response_class=FileResponse)
def video_content(video_id: str, server: ServerDep) -> FileResponse:
    job = _job(server, video_id)
    if job.status != "completed":
        raise RequestError(f"Job {video_id} is {job.status}: its video exists once it is completed.", status=409)
    return FileResponse(server.store.video_path(video_id), media_type="video/mp4", filename=f"{video_id}.mp4")


@router.delete("/v1/videos/{video_id}", response_model=None)
async def delete_video(video_id: str, server: ServerDep) -> VideoJob | VideoDeleted:
    """A queued or running job is cancelled (a running one at its next denoising step: this waits for it) and
    stays listed; a finished job is removed with its video."""
    job = _job(server, video_id)
    if job.status in FINISHED:
        server.store.delete(video_id)
        return VideoDeleted(id=video_id)
    job = server.store.cancel(video_id)
    if job.status == "in_progress":
        job = await _finished(server.store, video_id, CANCEL_WAIT_S)
    return _video(job, server)


async def _finished(store: JobStore, job_id: str, timeout: float = math.inf) -> Job:
    """The job once finished, or as it stands after `timeout` seconds: polled on the event loop, so that waiting
    requests hold no thread (the thread pool also runs the handlers that are not async)."""
    deadline = time.monotonic() + timeout
    while (job := store.get(job_id)).status not in FINISHED and time.monotonic() < deadline:
        await anyio.sleep(WAIT_POLL_S)
    return job


def _job(server: Server, video_id: str) -> Job:
    job = server.store.get(video_id)
    if job is None:
        raise RequestError(f"No job {video_id!r} (GET /v1/videos lists them).", param="video_id", status=404)
    return job


def _video(job: Job, server: Server) -> VideoJob:
    return VideoJob(
        id=job.id, model=server.served.model, status=job.status, progress=job.progress,
        created_at=int(job.created_at), completed_at=job.completed_at, size=job.size,
        seconds=f"{job.num_frames / job.fps:.3g}", num_frames=job.num_frames, fps=job.fps,
        prompt=job.request["prompt"], error=job.error,
    )  # fmt: skip


async def _request_of(request: Request, max_upload: int) -> tuple[VideoRequest, tuple[bytes, str] | None]:
    """The body's fields as a `VideoRequest`, and the image upload (bytes, file suffix); 413 past `max_upload`."""
    length = request.headers.get("content-length")
    kind = request.headers.get("content-type", "")
    if length is None or not length.isdigit():
        raise RequestError("Send the body with a Content-Length header.", status=411)
    if int(length) > max_upload + FORM_ALLOWANCE:
        raise _too_large(int(length), max_upload)
    image = None
    if kind.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        async with request.form(max_files=1) as form:  # its spooled files are closed after
            fields = {name: value for name, value in form.multi_items() if not isinstance(value, UploadFile)}
            if isinstance(upload := form.get("input_reference"), UploadFile):
                image = await _image_of(upload, max_upload)
    elif kind.startswith("application/json"):
        fields = await _json_object(request)
    else:
        raise RequestError(f"Content-Type {kind!r}: send JSON, or a form (multipart with an image).", status=415)
    if "input_reference" in fields:
        raise RequestError(
            "input_reference must be an image file part of a multipart/form-data body.", param="input_reference"
        )
    return _validated(fields), image


async def _image_of(upload: UploadFile, max_upload: int) -> tuple[bytes, str]:
    """The upload's bytes and its file suffix (lower case; "" where it is not a plain one)."""
    data = await upload.read()
    if len(data) > max_upload:
        raise _too_large(len(data), max_upload)
    suffix = Path(upload.filename or "").suffix.lower()
    return data, suffix if _SUFFIX.fullmatch(suffix) else ""


async def _json_object(request: Request) -> dict[str, object]:
    try:
        fields = await request.json()
    except ValueError as error:
        raise RequestError(f"The body is not JSON ({error}).") from None
    if not isinstance(fields, dict):
        raise RequestError(f"The body must be a JSON object of fields, got {type(fields).__name__}.")
    return fields


def _validated(fields: dict[str, object]) -> VideoRequest:
    try:
        return VideoRequest.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        param = ".".join(str(part) for part in first["loc"])
        given = repr(first["input"])
        given = given if len(given) <= MAX_QUOTED else f"{given[:MAX_QUOTED]}..."
        raise RequestError(f"{param}: {first['msg']} (got {given}).", param=param) from None


def _too_large(size: int, limit: int) -> RequestError:
    return RequestError(
        f"The upload is {size} bytes, above this server's {limit} (ltx-jax serve --max-upload-mb "
        f"{limit / MiB:g}); send a smaller image.",
        param="input_reference",
        status=413,
    )


def _error_response(status: int, message: str, *, param: str | None = None, code: str | None = None) -> JSONResponse:
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


async def _request_error(_: Request, error: RequestError) -> JSONResponse:
    return _error_response(error.status, str(error), param=error.param)


async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
    response = _error_response(error.status_code, str(error.detail))
    response.headers.update(error.headers or {})
    return response
