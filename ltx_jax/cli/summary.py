"""`scripts/generate.py`'s summary: what each video took (phases, compilations, memory), printed at the end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltx_jax.pipeline import flows


class Compilations:
    """XLA compilations while active (`with compilations:`): how many, their seconds, and how many came
    from the persistent cache instead. JAX reports both through `jax.monitoring`."""

    COMPILE, CACHE_HIT = "/jax/core/compile/backend_compile_duration", "/jax/compilation_cache/cache_hits"

    def __init__(self) -> None:
        import jax  # noqa: PLC0415

        self.active, self.seconds, self.count, self.hits = False, 0.0, 0, 0
        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)

    def _duration(self, event: str, seconds: float, **_: object) -> None:
        if self.active and event == self.COMPILE:
            self.seconds, self.count = self.seconds + seconds, self.count + 1

    def _event(self, event: str, **_: object) -> None:
        self.hits += self.active and event == self.CACHE_HIT

    def __enter__(self) -> None:
        self.active, self.seconds, self.count, self.hits = True, 0.0, 0, 0

    def __exit__(self, *exc: object) -> None:
        self.active = False

    def summary(self) -> str:
        return f"{self.count} programs in {self.seconds:.1f} s, {self.hits} from the persistent cache"


def save_latents(path: Path, out: Any) -> None:  # noqa: ANN401 - a GeneratedVideo
    """The final latents as an .npz; the file appears only when complete (written beside, then renamed)."""
    import numpy as np  # noqa: PLC0415

    path.parent.mkdir(parents=True, exist_ok=True)
    latents = {"video": out.video_latent, "audio": out.audio_latent}
    partial = path.with_name(f".{path.name}.partial.npz")
    try:
        np.savez(partial, **{name: np.asarray(v, np.float32) for name, v in latents.items() if v is not None})
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def describe_mesh(mesh: Any, runtime: Any) -> str:  # noqa: ANN401
    return f"{mesh.size} x {mesh.devices.flat[0].device_kind} ({runtime.strategy}, {runtime.backend})"


def format_summary(info: dict[str, Any]) -> str:
    lines = [f"{key:>10}: {info[key]}" for key in ("weights", "pipeline", "mesh")]
    lines.append(f"{'loading':>10}: {info['load_s']:.1f} s; prompts encoded in {info['encode_s']:.1f} s")
    audio_only = flows.get(info["pipeline"]).audio_only  # t2a: no frames, a .wav
    for video in info["videos"]:
        out, s = video["output"], video["output"].settings
        decoded = out.video is not None or out.audio is not None  # on process 0
        size = "audio only, the length of " if audio_only else f"{s.width}x{s.height}, "
        length = f"{s.num_frames} frames at {s.frame_rate:g} fps"
        lines.append(f"{'video':>10}: {size}{length}, {s.num_inference_steps} steps")
        audio = "none" if out.audio is None else f"{out.audio.shape[0] / out.sample_rate:.2f} s at {out.sample_rate} Hz"
        lines.append(f"{'audio':>10}: {audio if decoded else '(decoded by process 0)'}")
        for tokens, stats in out.forwards.items():
            label = "audio only" if tokens is None else f"{tokens} video tokens"
            median = f"{stats.median_s * 1e3:.1f} ms each (median)"
            if stats.peak_memory is not None:
                median += f", memory peak {stats.peak_memory / 2**30:.1f} GiB after them"
            lines.append(f"{'DiT':>10}: {label}: {stats.forwards} forwards, {median}")
        lines.append(f"{'time':>10}: {format_phases(out.timings)}; compiling: {video['compiling']}")
        lines.append(f"{'output':>10}: {video['path'] if decoded else '(written by process 0)'}")
    lines.append(f"{'memory':>10}: {peak_memory(info['peaks'], info['videos'][-1]['output'])}")
    lines.append(f"{'total':>10}: {info.get('total_s', 0.0):.1f} s")
    return "\n".join(lines)


STAGES = ("stage_1_denoising", "upsampling", "stage_2_denoising")  # within "denoising"


def format_phases(timings: dict[str, float]) -> str:
    """'denoising 78.5 s (stage 1 denoising 50.0 s, ...), video decoding 7.8 s, ...'."""

    def seconds(names: list[str]) -> str:
        return ", ".join(f"{name.replace('_', ' ')} {timings[name]:.1f} s" for name in names)

    stages = [name for name in STAGES if name in timings]
    parts = []
    for name in timings:
        if name in STAGES:
            continue
        parts.append(seconds([name]) + (f" ({seconds(stages)})" if name == "denoising" and stages else ""))
    return ", ".join(parts)


def peak_memory(before: dict[str, int | None], out: Any) -> str:  # noqa: ANN401 - a GeneratedVideo
    """The device-memory peak, and after which phase it was reached (loading and prompt encoding, then the
    phases of the last video)."""
    if None in before.values():
        return "peak not reported by this backend"
    phases = {**before, **{phase.replace("_", " "): value for phase, value in out.peak_memory.items()}}
    by_phase = ", ".join(f"{phase} {value / 2**30:.1f}" for phase, value in phases.items())
    return f"peak {max(phases.values()) / 2**30:.1f} GiB on one device (the peak so far, in GiB, after {by_phase})"
