"""The one thread that runs jobs on the pipeline, one at a time, and the compilation of the served sizes at start.

A job runs `LTXPipeline.generate` with an `on_step` hook: before each DiT forward it records the percent of
denoising steps done and, if the job was cancelled (or the server is stopping), raises `JobStopped` there, which
ends the generation before anything is decoded; the device is then free for the next job.

Under `jax.distributed` this thread runs on process 0 and leads the other processes (`peers.Leader`): it announces
each job to them before running it, shares each step's stop decision, ticks while idle and, when it ends, stops them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from ltx_jax.pipeline.ltx_pipeline import LTXPipeline
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.serve.jobs import INTERRUPTED, Job, JobStore
from ltx_jax.serve.peers import IDLE_TICK_S, Leader
from ltx_jax.serve.settings import Submission

logger = logging.getLogger(__name__)
WARMUP_PROMPT = "compiling the served shapes"
WARMUP_STEPS = 2  # the programs of a step do not depend on how many steps there are


class JobStopped(Exception):
    """Raised inside the generation to stop a job: `reason` is "cancelled", or why the server stopped it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Worker:
    """Takes the store's jobs one by one and runs them on `pipeline` in a background thread (with `peers`, the
    other processes of a `jax.distributed` run, on every process)."""

    def __init__(self, pipeline: LTXPipeline, store: JobStore, peers: Leader | None = None) -> None:
        self.pipeline, self.store, self.peers = pipeline, store, peers
        self.error: Exception | None = None  # what ended the thread early: no job runs any more
        self._thread = threading.Thread(target=self._run_all, name="ltx-jax-serve-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Closes the store (a running job stops at its next step, failed) and waits for the thread."""
        self.store.close(INTERRUPTED)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run_all(self) -> None:
        try:
            while (taken := self._next_job()) is not None:
                self._run(*taken)
        except Exception as error:  # a failure outside a job (the jobs folder): logged, and /health reports it
            self.error = error
            logger.exception("the worker stopped: no job runs from here on")
        finally:
            if self.peers is not None:  # the other processes end with this thread
                try:
                    self.peers.stop()
                except Exception:  # a collective that failed above fails again: JAX then ends the processes
                    logger.exception("the other processes could not be told to stop")

    def _next_job(self) -> tuple[Job, Submission] | None:
        """The store's next job (None once closed); with peers, a tick to them every `IDLE_TICK_S` until one comes."""
        if self.peers is None:
            return self.store.next_job()
        while (taken := self.store.next_job(IDLE_TICK_S)) is None and not self.store.closed:
            self.peers.idle()
        return taken

    def _run(self, job: Job, submission: Submission) -> None:
        start = time.perf_counter()
        path = self.store.video_path(job.id)

        def on_step(step: int, steps: int) -> None:
            self.store.set_progress(job.id, 100 * step // steps)
            reason = self.store.stop_reason(job.id)
            if self.peers is not None:  # every process stops at this step, or none
                self.peers.step(stop=reason is not None)
            if reason is not None:
                raise JobStopped(reason)

        try:
            if self.peers is not None:  # a job whose upload cannot be read fails before anything is broadcast
                self.peers.announce(job.id, job.request, None if job.image is None else path.with_name(job.image))
            self.pipeline.generate(
                submission.prompt, submission.settings, negative_prompt=submission.negative_prompt,
                output_path=path, on_step=on_step,
            )  # fmt: skip
        except JobStopped as stop:
            self._stopped(job, stop.reason)
            return
        except Exception as error:  # the job fails; the server goes on with the next
            logger.exception("job %s failed", job.id)
            self.store.finish(job.id, "failed", ("generation_failed", f"{type(error).__name__}: {error}"))
            return
        reason = self.store.stop_reason(job.id)  # asked while decoding, which does not stop: nothing is kept
        if reason is not None:
            self._stopped(job, reason)
            return
        self.store.finish(job.id, "completed")
        logger.info("job %s completed in %.1f s", job.id, time.perf_counter() - start)

    def _stopped(self, job: Job, reason: str) -> None:
        if reason == "cancelled":
            self.store.finish(job.id, "cancelled")
        else:
            self.store.finish(job.id, "failed", ("interrupted", reason))
        logger.info("job %s stopped: %s", job.id, reason)


def compile_sizes(pipeline: LTXPipeline, sizes: Sequence[tuple[int, int, int]]) -> None:
    """Generates once at each `(width, height, frames)` with the flow's default guidance, so that a request of
    that size finds every program compiled (one with other guidance passes or an image compiles its own once)."""
    steps = WARMUP_STEPS if pipeline.flow.guided else None  # the distilled flows' sigmas are fixed
    for width, height, frames in sizes:
        start = time.perf_counter()
        settings = GenerationSettings(height=height, width=width, num_frames=frames, num_inference_steps=steps)
        pipeline.generate(WARMUP_PROMPT, settings)
        logger.info("compiled %dx%d, %d frames in %.1f s", width, height, frames, time.perf_counter() - start)
