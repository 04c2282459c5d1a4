"""Where a generation can stop: before each DiT forward, every process of the run at once.

`StoppableForward` wraps the DiT: each forward first asks `interrupts.check_stop()`, which raises
`Terminated` on every process if any has a pending SIGINT/SIGTERM/SIGHUP (in a cluster the processes
exchange their pending signals there, so they stop at the same step; alone, a signal whose exception
was lost ends the run here). Timing (`timing.TimedForward`) is a separate wrapper.

The same point reports progress: with a `StepWatch` set (`LTXPipeline.generate(on_step=...)`), each forward
first tells it which of the plan's denoising steps it belongs to, and whatever the watch raises stops the
generation there, as a signal does (`ltx-jax serve` cancels a job so).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ltx_jax.interrupts import check_stop
from ltx_jax.model.modality import Modality
from ltx_jax.pipeline.denoisers import Forward
from ltx_jax.pipeline.flows import Plan

OnStep = Callable[[int, int], None]  # (the plan's step a forward belongs to, 0-based; the plan's steps)


class StepWatch:
    """Which of a plan's denoising steps each DiT forward belongs to, from the noise level it runs at.

    Every sampler starts each step with a forward at the step's sigma (a frozen stream runs at 0: the larger
    stream's counts). A step's batch chunks repeat that sigma; res_2s's substep and final prediction run at
    sigmas between the plan's, which match no step and keep the last. Sigmas fall within a stage, so a
    match is searched from the current step on, then in the later stages.
    """

    def __init__(self, plan: Plan, on_step: OnStep) -> None:
        self._sigmas = [np.asarray(stage.sigmas[:-1], np.float32) for stage in plan.stages]
        self._offsets = np.cumsum([0] + [len(sigmas) for sigmas in self._sigmas])
        self._stage = self._step = 0
        self._on_step = on_step

    def __call__(self, video: Modality | None, audio: Modality | None) -> None:
        # a (passes x B,) host read: the forwards are waited for one by one anyway (`TimedForward`)
        sigma = np.float32(max(float(np.max(np.asarray(m.sigma))) for m in (video, audio) if m is not None))
        for stage in range(self._stage, len(self._sigmas)):
            first = self._step if stage == self._stage else 0
            hits = np.flatnonzero(self._sigmas[stage][first:] == sigma)
            if hits.size:
                self._stage, self._step = stage, first + int(hits[0])
                break
        self._on_step(int(self._offsets[self._stage]) + self._step, int(self._offsets[-1]))


class StoppableForward:
    """The DiT `forward`, with a stop check (and the `watch`, where one is set) before each call."""

    def __init__(self, forward: Forward) -> None:
        self.forward = forward
        self.watch: StepWatch | None = None

    def __call__(self, video: object, audio: object, perturbations: object = None) -> tuple:
        check_stop()
        if self.watch is not None:
            self.watch(video, audio)
        return self.forward(video, audio, perturbations)

    def compile_ahead(self, video: object, audio: object, perturbations: object = None) -> None:
        """The wrapped forward's `compile_ahead` (`SequenceParallel.compile_ahead`)."""
        self.forward.compile_ahead(video, audio, perturbations)
