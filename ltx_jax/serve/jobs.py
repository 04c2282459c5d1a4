"""The jobs of `ltx-jax serve`: a queue run one at a time, kept in a folder that outlives the process.

Each job is a folder `<jobs dir>/<id>/` holding `job.json` (its record, rewritten whole through a temporary file
and a rename, so a crash leaves the old record or the new one), the uploaded image where there is one, and
`video.mp4` once completed (the pipeline's writer renames it into place when the file is whole). A store opened
on a folder takes its jobs back: finished ones stay listed, one that was running when the process ended is
failed (its work is lost), queued ones are checked again and run. Progress lives in memory only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ltx_jax.serve.schema import FINISHED, Status, VideoRequest
from ltx_jax.serve.settings import RequestError, Submission

logger = logging.getLogger(__name__)
VIDEO = "video.mp4"
RECORD = "job.json"
ID_PREFIX = "video_"
INTERRUPTED = "The server stopped while this job ran; submit it again."
Check = Callable[[VideoRequest, Path | None], Submission]  # `settings.checked` for the served pipeline


@dataclasses.dataclass(frozen=True)
class Job:
    """One job's record: what was asked (`request`, the fields as the client gave them; `image`, the upload's
    file name in the job's folder), what it resolved to (`size`, `num_frames`, `fps`), and how it stands."""

    id: str
    status: Status
    created_at: float  # seconds since the epoch, to order jobs submitted within a second
    request: dict[str, Any]
    size: str
    num_frames: int
    fps: float
    image: str | None = None
    progress: int = 0
    completed_at: int | None = None
    error: dict[str, str] | None = None


class JobStore:
    """The jobs in `folder`, the queue of those waiting (at most `max_queue`), and the running job's stop request.
    Thread-safe: the HTTP handlers and the worker share it."""

    def __init__(self, folder: Path, check: Check, *, max_queue: int) -> None:
        self.folder, self._check, self._max_queue = Path(folder), check, max_queue
        self.folder.mkdir(parents=True, exist_ok=True)
        self._changed = threading.Condition()  # the lock; notified when a job is queued or the store closes
        self._jobs: dict[str, Job] = {}
        self._queue: deque[tuple[str, Submission]] = deque()
        self._stops: dict[str, str] = {}  # running job -> why it must stop ("cancelled", or a failure's message)
        self._closed = False
        self._reopen()

    def submit(self, request: VideoRequest, image: tuple[bytes, str] | None = None) -> Job:
        """Checks `request` (with the uploaded `image`: its bytes and file suffix) and queues it; raises
        `RequestError` (429 when the queue is full) and keeps nothing of a refused request."""
        with self._changed:
            if len(self._queue) >= self._max_queue:
                raise RequestError(
                    f"The queue is full ({self._max_queue} jobs waiting; ltx-jax serve --max-queue); retry once "
                    "a job has finished.",
                    status=429,
                )
            job_id = f"{ID_PREFIX}{uuid.uuid4().hex}"
            folder = self.folder / job_id
            folder.mkdir()
            try:
                name = None if image is None else f"input{image[1]}"
                if image is not None:
                    (folder / name).write_bytes(image[0])
                submission = self._check(request, None if name is None else folder / name)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            job = _job_of(job_id, request, submission, name)
            self._save(job)
            self._queue.append((job_id, submission))
            self._changed.notify_all()
            return job

    def get(self, job_id: str) -> Job | None:
        with self._changed:
            return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        """Every job, newest first."""
        with self._changed:
            return sorted(self._jobs.values(), key=lambda job: job.created_at, reverse=True)

    def video_path(self, job_id: str) -> Path:
        return self.folder / job_id / VIDEO

    def next_job(self, timeout: float | None = None) -> tuple[Job, Submission] | None:
        """Blocks until a job is queued (at most `timeout` seconds: then None), marks it in progress and returns it;
        None once the store is closed."""
        with self._changed:
            self._changed.wait_for(lambda: self._queue or self._closed, timeout)
            if self._closed or not self._queue:
                return None
            job_id, submission = self._queue.popleft()
            return self._save(dataclasses.replace(self._jobs[job_id], status="in_progress")), submission

    @property
    def closed(self) -> bool:
        with self._changed:
            return self._closed

    def set_progress(self, job_id: str, percent: int) -> None:
        with self._changed:
            self._jobs[job_id] = dataclasses.replace(self._jobs[job_id], progress=percent)

    def stop_reason(self, job_id: str) -> str | None:
        """Why the running job `job_id` must stop (None: it goes on)."""
        with self._changed:
            return self._stops.get(job_id)

    def finish(self, job_id: str, status: Status, error: tuple[str, str] | None = None) -> Job:
        """Ends a job: `status` (and `error`: its code and message); a job that did not complete keeps no video."""
        with self._changed:
            self._stops.pop(job_id, None)
            if status != "completed":
                _remove_video(self.video_path(job_id))
            job = dataclasses.replace(
                self._jobs[job_id], status=status, completed_at=int(time.time()),
                progress=100 if status == "completed" else self._jobs[job_id].progress,
                error=None if error is None else {"code": error[0], "message": error[1]},
            )  # fmt: skip
            return self._save(job)

    def cancel(self, job_id: str) -> Job:
        """A queued job is cancelled at once; a running one is asked to stop at its next denoising step."""
        with self._changed:
            job = self._jobs[job_id]
            if job.status == "queued":
                self._queue = deque(entry for entry in self._queue if entry[0] != job_id)
                return self._save(dataclasses.replace(job, status="cancelled", completed_at=int(time.time())))
            if job.status == "in_progress":
                self._stops[job_id] = "cancelled"
            return job

    def delete(self, job_id: str) -> None:
        """Removes a finished job and its files."""
        with self._changed:
            if self._jobs[job_id].status not in FINISHED:
                raise RequestError(f"Job {job_id} has not finished; cancel it first (DELETE cancels).", status=409)
            del self._jobs[job_id]
            shutil.rmtree(self.folder / job_id, ignore_errors=True)

    def close(self, reason: str) -> None:
        """No job is handed out from here on; a running one is asked to stop and fail with `reason`. Queued jobs
        stay queued on disk, for the next store opened on the folder."""
        with self._changed:
            self._closed = True
            self._stops.update({job.id: reason for job in self._jobs.values() if job.status == "in_progress"})
            self._changed.notify_all()

    def _save(self, job: Job) -> Job:
        """Keeps `job` and writes its record: a temporary file, renamed over the old one."""
        path = self.folder / job.id / RECORD
        partial = path.with_name(f"{RECORD}.partial")
        partial.write_text(json.dumps(dataclasses.asdict(job), indent=1))
        os.replace(partial, path)
        self._jobs[job.id] = job
        return job

    def _reopen(self) -> None:
        """The jobs recorded in the folder, as the module docstring says."""
        records = sorted(self.folder.glob(f"{ID_PREFIX}*/{RECORD}"))
        jobs = sorted((Job(**json.loads(path.read_text())) for path in records), key=lambda job: job.created_at)
        for job in jobs:
            self._jobs[job.id] = job
            if job.status == "in_progress":
                self.finish(job.id, "failed", ("interrupted", INTERRUPTED))
            elif job.status == "queued":
                self._requeue(job)
            elif job.status != "completed":
                _remove_video(self.video_path(job.id))
        logger.info("jobs in %s: %s", self.folder, _counts(self._jobs.values()) or "none")

    def _requeue(self, job: Job) -> None:
        image = None if job.image is None else self.folder / job.id / job.image
        try:
            submission = self._check(VideoRequest(**job.request), image)
        except ValueError as error:  # a RequestError: the server's limits or model may have changed since
            self.finish(job.id, "failed", ("invalid_request", str(error)))
            return
        self._queue.append((job.id, submission))


def _job_of(job_id: str, request: VideoRequest, submission: Submission, image: str | None) -> Job:
    settings = submission.settings
    return Job(
        id=job_id, status="queued", created_at=time.time(), request=request.model_dump(exclude_none=True),
        size=f"{settings.width}x{settings.height}", num_frames=settings.num_frames, fps=settings.frame_rate,
        image=image,
    )  # fmt: skip


def _remove_video(path: Path) -> None:
    """The video and what the writer leaves while writing (`<path>.partial.mp4`)."""
    for leftover in (path, path.with_name(f"{path.name}.partial.mp4")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _counts(jobs: object) -> str:
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
