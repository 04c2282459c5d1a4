"""The one thread that runs jobs on the pipeline, one at a time, and the compilation of the served sizes at start.

A job runs `LTXPipeline.generate` with an `on_step` hook: before each DiT forward it records the percent of
denoising steps done and, if the job was cancelled (or the server is stopping), raises `JobStopped` there, which
ends the generation before anything is decoded; the device is then free for the next job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from ltx_jax.pipeline.ltx_pipeline import LTXPipeline
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.serve.jobs import INTERRUPTED, Job, JobStore
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
    """Takes the store's jobs one by one and runs them on `pipeline` in a background thread."""

    def __init__(self, pipeline: LTXPipeline, store: JobStore) -> None:
        self.pipeline, self.store = pipeline, store
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
            while (taken := self.store.next_job()) is not None:
                self._run(*taken)
        except Exception as error:  # a failure outside a job (the jobs folder): logged, and /health reports it
            self.error = error
            logger.exception("the worker stopped: no job runs from here on")

    def _run(self, job: Job, submission: Submission) -> None:
        start = time.perf_counter()
        path = self.store.video_path(job.id)

        def on_step(step: int, steps: int) -> None:
            self.store.set_progress(job.id, 100 * step // steps)
            reason = self.store.stop_reason(job.id)
            if reason is not None:
                raise JobStopped(reason)

        try:
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
