"""How long each phase and each DiT forward of a generation took, and the device memory peak after it."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

import jax

from ltx_jax.pipeline.denoisers import Forward


@dataclasses.dataclass(frozen=True)
class ForwardStats:
    """The DiT forwards of one token count in a generation (the first one also compiled, if new), and the
    device-memory peak (bytes, since the process started) after the last of them; None on CPU."""

    forwards: int
    median_s: float
    peak_memory: int | None = None


class TimedForward:
    """The DiT, waited for after each forward, its wall time and the memory peak recorded per video token count."""

    def __init__(self, forward: Forward) -> None:
        self.forward, self.seconds, self.peaks = forward, {}, {}

    def __call__(self, video: object, audio: object, perturbations: object = None) -> tuple:
        start = time.perf_counter()
        out = jax.block_until_ready(self.forward(video, audio, perturbations))
        tokens = None if video is None else video.latent.shape[1]
        self.seconds.setdefault(tokens, []).append(time.perf_counter() - start)
        self.peaks[tokens] = device_memory_peak()
        return out

    def compile_ahead(self, video: object, audio: object, perturbations: object = None) -> None:
        """The forward's `compile_ahead` (`SequenceParallel.compile_ahead`)."""
        self.forward.compile_ahead(video, audio, perturbations)


@contextlib.contextmanager
def timed_phase(timings: dict[str, float], phase: str, peaks: dict[str, int]) -> Iterator[None]:
    """Adds the block's wall time to `timings[phase]` and records the device-memory peak after it."""
    start = time.perf_counter()
    yield
    timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start
    peak = device_memory_peak()
    if peak is not None:
        peaks[phase] = peak


def device_memory_peak() -> int | None:
    """The largest `peak_bytes_in_use` among this process's devices; None where a backend does not report it."""
    peaks = [(device.memory_stats() or {}).get("peak_bytes_in_use") for device in jax.local_devices()]
    return None if None in peaks else max(peaks)
