"""What the first local device is, for the choices that depend on the hardware (nvcc's target, fp8 matmuls)."""

from __future__ import annotations

import re

import jax


def cuda_compute_capability() -> tuple[int, int] | None:
    """The first local device's CUDA compute capability, e.g. (9, 0) on Hopper; None off CUDA GPUs (the CPU,
    or ROCm, whose devices name an architecture such as "gfx90a")."""
    capability = getattr(jax.local_devices()[0], "compute_capability", None)
    match = re.fullmatch(r"(\d+)\.(\d+)", str(capability))
    return (int(match.group(1)), int(match.group(2))) if match else None
