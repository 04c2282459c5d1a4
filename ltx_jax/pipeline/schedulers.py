"""Sigma schedules: `LTX2Scheduler` and the distilled lists.

Source: `ltx_core/components/schedulers.py` and `ltx_pipelines/utils/constants.py`. Computed in
float32 with the same operation order as torch, so the schedule equals ltx-core's bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

BASE_SHIFT_ANCHOR = 1024
MAX_SHIFT_ANCHOR = 4096

# Tuned with the distillation (stage 1: 8 steps; stage 2 / two-stage refinement: 3 steps).
DISTILLED_SIGMA_VALUES = (1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0)
STAGE_2_DISTILLED_SIGMA_VALUES = (0.909375, 0.725, 0.421875, 0.0)


def ltx2_sigmas(
    steps: int,
    tokens: int = MAX_SHIFT_ANCHOR,
    max_shift: float = 2.05,
    base_shift: float = 0.95,
    stretch: bool = True,
    terminal: float = 0.1,
) -> np.ndarray:
    """`(steps + 1,)` float32 sigmas from 1 to 0, shifted by the token count, stretched to `terminal`.

    The pipelines pass no latent, so `tokens` stays at its default of 4096 (a shift of 2.05).
    """
    if steps < 2 and stretch:
        # One step leaves sigma 1 as the only non-zero value, which cannot stretch (ltx-core returns NaN).
        raise ValueError(f"steps must be at least 2 for a stretched schedule, got {steps}.")
    sigmas = _torch_linspace(1.0, 0.0, steps + 1)
    slope = (max_shift - base_shift) / (MAX_SHIFT_ANCHOR - BASE_SHIFT_ANCHOR)
    shift = math.exp(tokens * slope + base_shift - slope * BASE_SHIFT_ANCHOR)
    nonzero = sigmas != 0
    with np.errstate(divide="ignore"):
        # torch evaluates `scalar / tensor` as `reciprocal(tensor) * scalar`; the same rounding here.
        denominator = np.float32(shift) + (np.float32(1) / sigmas - np.float32(1))
        shifted = (np.float32(1) / denominator) * np.float32(shift)
    sigmas = np.where(nonzero, shifted, np.float32(0)).astype(np.float32)
    if stretch:
        one_minus = np.float32(1) - sigmas[nonzero]
        scale = one_minus[-1] / np.float32(1.0 - terminal)
        sigmas[nonzero] = np.float32(1) - one_minus / scale
    return sigmas


def _torch_linspace(start: float, end: float, num: int) -> np.ndarray:
    """`torch.linspace` in float32, bit for bit.

    torch steps up from `start` for the first half and down from `end` for the second, each value one
    fused multiply-add (rounded once); float64 arithmetic rounded to float32 reproduces that.
    """
    step = np.float64(np.float32((np.float32(end) - np.float32(start)) / np.float32(max(num - 1, 1))))
    index = np.arange(num, dtype=np.float64)
    values = np.where(index < num // 2, start + step * index, end - step * (num - 1 - index))
    return values.astype(np.float32)
