"""Where a generation can stop: before each DiT forward, every process of the run at once.

`StoppableForward` wraps the DiT: each forward first asks `interrupts.check_stop()`, which raises
`Terminated` on every process if any has a pending SIGINT/SIGTERM/SIGHUP (in a cluster the processes
exchange their pending signals there, so they stop at the same step; alone, a signal whose exception
was lost ends the run here). Timing (`timing.TimedForward`) is a separate wrapper.
"""

from __future__ import annotations

from ltx_jax.interrupts import check_stop
from ltx_jax.pipeline.denoisers import Forward


class StoppableForward:
    """The DiT `forward`, with a stop check before each call."""

    def __init__(self, forward: Forward) -> None:
        self.forward = forward

    def __call__(self, video: object, audio: object, perturbations: object = None) -> tuple:
        check_stop()
        return self.forward(video, audio, perturbations)

    def compile_ahead(self, video: object, audio: object, perturbations: object = None) -> None:
        """The wrapped forward's `compile_ahead` (`SequenceParallel.compile_ahead`)."""
        self.forward.compile_ahead(video, audio, perturbations)
