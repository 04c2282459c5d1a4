"""The Euler denoising loop over a sigma schedule, with a progress bar.

Source: `ltx_pipelines/utils/samplers.py::euler_denoising_loop`: at each step the denoiser's x0 is
blended with the conditioning (`post_process_latent`) and an Euler step moves the latent from
`sigma` to the next sigma.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import numpy as np
from tqdm.auto import tqdm

from ltx_jax.pipeline.diffusion_steps import euler_step, post_process_latent
from ltx_jax.pipeline.types import LatentState

Denoiser = Callable[[LatentState | None, LatentState | None, float, int], tuple[jax.Array | None, jax.Array | None]]


def _advance(state: LatentState, denoised: jax.Array, sigma: jax.Array, sigma_next: jax.Array) -> LatentState:
    """The state one Euler step on. Only the latent goes through the program: the rest of the state stays
    as it was (a host denoise mask stays on the host, where the denoiser reads it)."""
    return state.replace(latent=_advanced_latent(state, denoised, sigma, sigma_next))


@jax.jit
def _advanced_latent(state: LatentState, denoised: jax.Array, sigma: jax.Array, sigma_next: jax.Array) -> jax.Array:
    denoised = post_process_latent(denoised, state.denoise_mask, state.clean_latent)
    return euler_step(state.latent, denoised, sigma, sigma_next)


def euler_denoising_loop(
    sigmas: Sequence[float] | np.ndarray,
    video: LatentState | None,
    audio: LatentState | None,
    denoiser: Denoiser,
    *,
    description: str = "denoising",
    progress: bool = True,
) -> tuple[LatentState | None, LatentState | None]:
    """Runs `len(sigmas) - 1` steps; returns the final video and audio states."""
    sigmas = np.asarray(sigmas, np.float32)
    if sigmas.ndim != 1 or len(sigmas) < 2:
        raise ValueError(f"sigmas must be a 1-D schedule with at least 2 values, got shape {sigmas.shape}.")
    if np.any(sigmas[:-1] == 0):
        raise ValueError(f"sigmas may be 0 only at the end (x0 = x - v * sigma would stall), got {sigmas.tolist()}.")
    for step in tqdm(range(len(sigmas) - 1), desc=description, unit="step", disable=not progress):
        sigma, sigma_next = sigmas[step], sigmas[step + 1]
        x0_video, x0_audio = denoiser(video, audio, float(sigma), step)
        video = None if video is None else _advance(video, x0_video, sigma, sigma_next)
        audio = None if audio is None else _advance(audio, x0_audio, sigma, sigma_next)
    if video is not None:
        jax.block_until_ready(video.latent)
    return video, audio
