"""The res_2s sampler: a second-order exponential Runge-Kutta step with SDE noise, for the HQ flow.

Sources: `ltx_pipelines/utils/samplers.py::res2s_audio_video_denoising_loop` (its defaults: bong
iteration on, 100 iterations, legacy post-processing), `ltx_pipelines/utils/res2s.py`,
`ltx_core/components/diffusion_steps.py::Res2sDiffusionStep`. As the reference does, the sampler's
arithmetic runs in float64 (here on the host, numpy: the latents are small next to the DiT's work)
and the states handed to the DiT are rounded to the latent dtype. Per step: the x0 prediction at
sigma, a midpoint at sqrt(sigma * sigma_next) with SDE noise, the "bong" refinement of the anchor,
the prediction at the midpoint, their combination, SDE noise again. A schedule that ends at 0 ends
at 0.0011 instead, followed by one last prediction.

The SDE noise, like the reference's, does not depend on the generation's seed: two generators with
fixed seeds (one for the midpoints, one for the steps), drawn video then audio. The reference's are
torch generators, which cannot be reproduced here; `tests/test_flows_parity.py` replays the reference's
draws into `SdeNoise.draw`.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from ltx_jax.pipeline.diffusion_steps import post_process_latent
from ltx_jax.pipeline.samplers import Denoiser
from ltx_jax.pipeline.types import LatentState

C2 = 0.5  # the midpoint's position
BONG_ITERATIONS = 100
LAST_SIGMA = 0.0011  # replaces a final 0 (the step divides by sigma - sigma_next)
STEP_SEED, SUBSTEP_SEED = 2**64 - 1, 9999  # torch's manual_seed(-1) and the reference's substep seed


def phi(j: int, neg_h: float) -> float:
    """`phi_j(z) = (e^z - sum_{k<j} z^k / k!) / z^j`, `1 / j!` near 0."""
    if abs(neg_h) < 1e-10:
        return 1.0 / math.factorial(j)
    remainder = sum(neg_h**k / math.factorial(k) for k in range(j))
    return (math.exp(neg_h) - remainder) / neg_h**j


def res2s_coefficients(h: float) -> tuple[float, float, float]:
    """`(a21, b1, b2)` for a step of `h = log(sigma / sigma_next)`."""
    a21 = C2 * phi(1, -h * C2)
    b2 = phi(2, -h) / C2
    return a21, phi(1, -h) - b2, b2


def normalized_noise(raw: np.ndarray) -> np.ndarray:
    """The reference's `_get_new_noise` after its draw: standardized as a whole, then per sample over
    the (tokens, channels) axes (unbiased standard deviations)."""
    noise = (raw - raw.mean()) / raw.std(ddof=1)
    return (noise - noise.mean(axis=(-2, -1), keepdims=True)) / noise.std(axis=(-2, -1), ddof=1, keepdims=True)


@dataclasses.dataclass
class SdeNoise:
    """The SDE noise draws: `draw(kind, shape)` -> float64 standard normal, `kind` "step" or "substep"."""

    step: np.random.Generator = dataclasses.field(default_factory=lambda: np.random.default_rng(STEP_SEED))
    substep: np.random.Generator = dataclasses.field(default_factory=lambda: np.random.default_rng(SUBSTEP_SEED))

    def draw(self, kind: str, shape: tuple[int, ...]) -> np.ndarray:
        return getattr(self, kind).standard_normal(shape)


def sde_step(
    sample: np.ndarray, target: np.ndarray, sigma: float, sigma_next: float, noise: np.ndarray, dtype: type
) -> np.ndarray:
    """`Res2sDiffusionStep.step` with `sigma_up = sigma_next / 2`; its coefficients in `dtype`
    (float64 at the midpoint, float32 at the step, as the reference's sigma tensors are)."""
    sigma, sigma_next = dtype(sigma), dtype(sigma_next)
    sigma_up = dtype(sigma_next * dtype(0.5))
    if sigma_up == 0 or sigma_next == 0:
        return target
    residual = dtype(np.sqrt(max(sigma_next**2 - sigma_up**2, dtype(0))))
    alpha_ratio = dtype(dtype(1) - sigma_next) + residual
    sigma_down = dtype(residual / alpha_ratio)
    eps = (sample - target) / dtype(sigma - sigma_next)
    return alpha_ratio * ((sample - sigma * eps) + sigma_down * eps) + sigma_up * noise


def res2s_denoising_loop(
    sigmas: np.ndarray,
    video: LatentState | None,
    audio: LatentState | None,
    denoiser: Denoiser,
    *,
    noise: SdeNoise | None = None,
    description: str = "denoising",
    progress: bool = True,
) -> tuple[LatentState | None, LatentState | None]:
    """Runs `len(sigmas) - 1` res_2s steps; returns the final video and audio states."""
    noise = noise or SdeNoise()
    sigmas = np.asarray(sigmas, np.float32)
    steps = len(sigmas) - 1
    if sigmas[-1] == 0:
        sigmas = np.concatenate([sigmas[:-1], np.asarray([LAST_SIGMA, 0.0], np.float32)])
    hs = -np.log(sigmas[1:].astype(np.float64) / sigmas[:-1].astype(np.float64))
    states = [video, audio]
    for step in tqdm(range(steps), desc=description, unit="step", disable=not progress):
        states = _step(states, sigmas, step, float(hs[step]), denoiser, noise)
    if sigmas[-1] == 0:
        x0 = _predict(states, denoiser, float(sigmas[steps]), steps)
        states = _with_latents(states, x0)
    return states[0], states[1]


def _predict(states: list, denoiser: Denoiser, sigma: float, step: int, originals: list | None = None) -> list:
    """The post-processed x0 of each state (with the masks of `originals`, default the states), float64."""
    originals = originals or states
    x0 = denoiser(*states, sigma, step)
    return [
        None if s is None else np.asarray(post_process_latent(x, s.denoise_mask, s.clean_latent), np.float64)
        for s, x in zip(originals, x0, strict=True)
    ]


def _step(states: list, sigmas: np.ndarray, step: int, h: float, denoiser: Denoiser, noise: SdeNoise) -> list:
    sigma, sigma_next = np.float64(sigmas[step]), np.float64(sigmas[step + 1])
    anchors = [None if s is None else np.asarray(s.latent, np.float64) for s in states]
    x0_1 = _predict(states, denoiser, float(sigmas[step]), step)
    a21, b1, b2 = res2s_coefficients(h)
    sub_sigma = np.sqrt(sigma * sigma_next)
    eps_1 = [None if x is None else x - a for x, a in zip(x0_1, anchors, strict=True)]
    mids = [None if e is None else a + h * a21 * e for a, e in zip(anchors, eps_1, strict=True)]
    mids = _with_sde_noise(states, anchors, mids, sigma, sub_sigma, noise, "substep", np.float64)
    if h < 0.5 and sigma > 0.03:  # the reference's bong iteration: the anchor consistent with the midpoint
        for i, (mid, x0) in enumerate(zip(mids, x0_1, strict=True)):
            for _ in range(BONG_ITERATIONS if mid is not None else 0):
                anchors[i] = mid - h * a21 * eps_1[i]
                eps_1[i] = x0 - anchors[i]
    x0_2 = _predict(_with_latents(states, mids), denoiser, float(sub_sigma), 0, originals=states)
    nexts = [
        None if a is None else a + h * (b1 * e1 + b2 * (x2 - a)) for a, e1, x2 in zip(anchors, eps_1, x0_2, strict=True)
    ]
    nexts = _with_sde_noise(states, anchors, nexts, sigmas[step], sigmas[step + 1], noise, "step", np.float32)
    return _with_latents(states, nexts)


def _with_sde_noise(
    states: list, samples: list, targets: list, sigma: float, sigma_next: float, noise: SdeNoise, kind: str, dtype: type
) -> list:
    """Each target moved by an SDE step with fresh noise (video drawn first), then re-conditioned."""
    out = []
    for state, sample, target in zip(states, samples, targets, strict=True):
        if state is None:
            out.append(None)
            continue
        drawn = normalized_noise(noise.draw(kind, state.latent.shape))
        moved = sde_step(sample, target, sigma, sigma_next, drawn, dtype)
        mask = np.asarray(state.denoise_mask, np.float32)
        out.append(moved * mask + np.asarray(state.clean_latent, np.float32) * (1 - mask))
    return out


def _with_latents(states: list, latents: list) -> list:
    """The states with these float64 latents in each state's dtype, rounded through float32 as torch's
    `.to(torch.bfloat16)` rounds a float64 tensor."""
    return [
        None if s is None else s.replace(latent=jnp.asarray(x).astype(s.latent.dtype))
        for s, x in zip(states, latents, strict=True)
    ]
