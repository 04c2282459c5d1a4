"""`ltx-jax serve` on several processes (`jax.distributed`): process 0 serves the API and keeps the queue; every
process runs each job on the one mesh, as every process of `ltx-jax generate` runs its generation.

Process 0's worker tells the others (the followers) what to do through `multihost_utils.broadcast_one_to_all`, a
collective every process joins, in this order:
- before each job: the job, as its request's fields (what the client sent) and the uploaded image's bytes; each
  follower checks them as process 0 did (`settings.checked`, with the same flags on every process: the same
  settings) and generates with them;
- before each DiT forward of a job: go on, or stop here (the job was cancelled, or the server is stopping), so that
  every process stops at the same step;
- while the queue is empty: a tick every `IDLE_TICK_S`, so that an idle server's followers do not wait inside a
  collective for long (a GPU collective spins while it waits, and some backends abort one that waits for minutes);
  they do wait in one while process 0 alone decodes and writes each video, and while it starts (compiling);
- when the worker ends (the server stopping): stop, which ends the followers.
Only process 0 decodes and writes the video (as in `generate`). A message is a header of 4 int32 (kind, the request's
bytes, the image's bytes, 0), then for a job its bytes, padded to a power of two so that few programs are compiled.
"""

from __future__ import annotations

import json
import logging
import signal
import tempfile
from pathlib import Path
from types import FrameType

import numpy as np

from ltx_jax.pipeline.ltx_pipeline import LTXPipeline
from ltx_jax.serve.jobs import Check
from ltx_jax.serve.schema import VideoRequest

logger = logging.getLogger(__name__)
JOB, IDLE, STOP, GO_ON, STOP_HERE = 1, 2, 3, 4, 5  # the kinds of message
KINDS = {JOB: "a job", IDLE: "a tick", STOP: "stop", GO_ON: "a step", STOP_HERE: "a step"}
IDLE_TICK_S = 1.0
MIN_PAYLOAD = 4096  # bytes: a job's request without an image fits, so one program serves them all


def _broadcast(values: np.ndarray) -> np.ndarray:
    """Process 0's `values`, on every process (the others give an array of the same shape and dtype)."""
    from jax.experimental import multihost_utils  # noqa: PLC0415 - JAX's backends start after the device setup

    return np.asarray(multihost_utils.broadcast_one_to_all(values))


def _header(kind: int = 0, request_bytes: int = 0, image_bytes: int = 0) -> np.ndarray:
    return np.array([kind, request_bytes, image_bytes, 0], np.int32)


def _payload_size(size: int) -> int:
    return max(MIN_PAYLOAD, 1 << (size - 1).bit_length())


class Leader:
    """Process 0's side: what its worker tells the followers (each call is a collective every follower joins)."""

    def announce(self, job_id: str, request: dict, image: Path | None) -> None:
        """The job `job_id` runs next: its request's fields, and the uploaded image in the job's folder."""
        text = json.dumps({"id": job_id, "request": request, "image": None if image is None else image.suffix})
        fields, upload = text.encode(), b"" if image is None else image.read_bytes()
        _broadcast(_header(JOB, len(fields), len(upload)))
        data = fields + upload
        buffer = np.zeros(_payload_size(len(data)), np.uint8)
        buffer[: len(data)] = np.frombuffer(data, np.uint8)
        _broadcast(buffer)

    def step(self, stop: bool) -> None:
        """Before each DiT forward of the announced job: whether every process stops there."""
        _broadcast(_header(STOP_HERE if stop else GO_ON))

    def idle(self) -> None:
        _broadcast(_header(IDLE))

    def stop(self) -> None:
        _broadcast(_header(STOP))


class _Interrupted(Exception):
    """Raised by a follower's `on_step` to leave the generation: process 0 stopped the job there (`header` None),
    or went on to its next message without the job (a failure on process 0 alone): `header` is that message."""

    def __init__(self, header: np.ndarray | None) -> None:
        super().__init__("stopped by process 0")
        self.header = header


def _on_step(step: int, steps: int) -> None:
    header = _broadcast(_header())
    if header[0] == STOP_HERE:
        raise _Interrupted(None)
    if header[0] != GO_ON:
        raise _Interrupted(header)


def follow(pipeline: LTXPipeline, check: Check) -> None:
    """A follower's loop (every process but 0): runs each job process 0 announces on `pipeline`, checked by `check`
    as process 0 checked it, until process 0's stop message."""
    _signals_to_process_0()
    header = _broadcast(_header())
    while header[0] != STOP:
        if header[0] == JOB:
            header = _run(pipeline, check, header)
            if header is not None:  # process 0 left the job: this is its next message
                continue
        elif header[0] != IDLE:
            raise RuntimeError(f"ltx-jax serve: process 0 sent {KINDS.get(header[0], header[0])} outside a job.")
        header = _broadcast(_header())
    logger.info("process 0 stopped the server")


def _run(pipeline: LTXPipeline, check: Check, header: np.ndarray) -> np.ndarray | None:
    """The announced job, generated; the header of process 0's next message where it left the job."""
    request_bytes, total = int(header[1]), int(header[1] + header[2])
    data = _broadcast(np.zeros(_payload_size(total), np.uint8)).tobytes()
    message = json.loads(data[:request_bytes])
    with tempfile.TemporaryDirectory(prefix="ltx-jax-serve-") as folder:
        image = None
        if message["image"] is not None:  # the upload, under the name process 0 gave it (its suffix matters)
            image = Path(folder) / f"input{message['image']}"
            image.write_bytes(data[request_bytes:total])
        submission = check(VideoRequest(**message["request"]), image)  # as process 0 checked it: it passes
        try:
            pipeline.generate(
                submission.prompt, submission.settings, negative_prompt=submission.negative_prompt, on_step=_on_step
            )
        except _Interrupted as interrupted:
            what = "stopped by process 0" if interrupted.header is None else "left: process 0 went on without it"
            logger.info("job %s %s", message["id"], what)
            return interrupted.header
        except Exception:  # as on process 0, which failed the job the same way: the next job runs
            logger.exception("job %s failed", message["id"])
            return None
    logger.info("job %s ran on this process", message["id"])
    return None


def _signals_to_process_0() -> None:
    """SIGINT, SIGTERM and SIGHUP to a follower only say so, once: a follower ending alone would leave process 0's
    next collective without it. Process 0 (uvicorn's signal handlers) stops the job on every process and then the
    followers; a second signal ends the follower at once."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _told)


def _told(signum: int, _: FrameType | None) -> None:
    name = signal.Signals(signum).name
    logger.warning("%s: this process follows process 0; stop process 0 to stop the server (again: end it now)", name)
    for other in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(other) is _told:
            signal.signal(other, signal.default_int_handler if other == signal.SIGINT else signal.SIG_DFL)
