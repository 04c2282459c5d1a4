"""The Euler denoising loops over a sigma schedule, with a progress bar: deterministic, ancestral, and with
gradient estimation.

Sources: `ltx_pipelines/utils/samplers.py::euler_denoising_loop`: at each step the denoiser's x0 is
blended with the conditioning (`post_process_latent`) and an Euler step moves the latent from
`sigma` to the next sigma; `euler_ancestral_denoising_loop` with
`ltx_core/components/diffusion_steps.py::EulerAncestralDiffusionStep` (rectified flow): a step down to
`sigma_down <= sigma_next`, then fresh noise back up to `sigma_next`, variance preserving.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from ltx_jax.pipeline.diffusion_steps import euler_step, post_process_latent
from ltx_jax.pipeline.types import LatentState

Denoiser = Callable[[LatentState | None, LatentState | None, float, int], tuple[jax.Array | None, jax.Array | None]]
GE_GAMMA = 2.0  # ltx-pipelines' default gradient-estimation coefficient


# One stream's step: (step, modality (video 0, audio 1), state, its x0, sigma, next sigma) -> the next latent.
StreamStep = Callable[[int, int, LatentState, jax.Array, np.float32, np.float32], jax.Array]


def _stream_by_stream_loop(
    sigmas: Sequence[float] | np.ndarray,
    video: LatentState | None,
    audio: LatentState | None,
    denoiser: Denoiser,
    step_stream: StreamStep,
    *,
    description: str,
    progress: bool,
) -> tuple[LatentState | None, LatentState | None]:
    """`len(sigmas) - 1` steps: the denoiser's x0 for both streams, then `step_stream` for each stream present
    (video, then audio). Only the latent changes: the rest of a state stays as it was (a host denoise mask stays
    on the host, where the denoiser reads it)."""
    sigmas = _checked(sigmas)
    for step in tqdm(range(len(sigmas) - 1), desc=description, unit="step", disable=not progress):
        sigma, sigma_next = sigmas[step], sigmas[step + 1]
        x0 = denoiser(video, audio, float(sigma), step)
        video, audio = [
            None if state is None else state.replace(latent=step_stream(step, modality, state, x, sigma, sigma_next))
            for modality, (state, x) in enumerate(zip((video, audio), x0, strict=True))
        ]
    if video is not None:
        jax.block_until_ready(video.latent)
    return video, audio


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

    def step_stream(
        step: int, modality: int, state: LatentState, denoised: jax.Array, sigma: np.float32, sigma_next: np.float32
    ) -> jax.Array:
        return _advanced_latent(state, denoised, sigma, sigma_next)

    return _stream_by_stream_loop(
        sigmas, video, audio, denoiser, step_stream, description=description, progress=progress
    )


def euler_ancestral_denoising_loop(
    sigmas: Sequence[float] | np.ndarray,
    video: LatentState | None,
    audio: LatentState | None,
    denoiser: Denoiser,
    key: jax.Array,
    *,
    eta: float = 1.0,
    s_noise: float = 1.0,
    description: str = "denoising",
    progress: bool = True,
) -> tuple[LatentState | None, LatentState | None]:
    """`len(sigmas) - 1` ancestral Euler steps (`eta` 0: the deterministic loop's arithmetic, no noise);
    the noise of step `i` comes from `key` (`ancestral_noise`), video then audio; the last step to
    sigma 0 takes the prediction itself. Returns the final video and audio states."""

    def step_stream(
        step: int, modality: int, state: LatentState, denoised: jax.Array, sigma: np.float32, sigma_next: np.float32
    ) -> jax.Array:
        final = bool(sigma_next == 0)
        noise = None if final or eta == 0 else ancestral_noise(key, step, modality, state.latent)
        return _ancestral_latent(state, denoised, sigma, sigma_next, noise, eta=eta, s_noise=s_noise, final=final)

    return _stream_by_stream_loop(
        sigmas, video, audio, denoiser, step_stream, description=description, progress=progress
    )


def gradient_estimating_euler_denoising_loop(
    sigmas: Sequence[float] | np.ndarray,
    video: LatentState | None,
    audio: LatentState | None,
    denoiser: Denoiser,
    *,
    ge_gamma: float = GE_GAMMA,
    description: str = "denoising",
    progress: bool = True,
) -> tuple[LatentState | None, LatentState | None]:
    """`euler_denoising_loop` with gradient estimation (ltx-pipelines' `gradient_estimating_euler_denoising_loop`,
    https://openreview.net/pdf?id=o2ND9v0CeK): from the second step on, each stream steps along
    `previous + ge_gamma * (velocity - previous)` instead of its velocity; the step to sigma 0 takes the
    prediction itself. Fewer steps (20-30 instead of 40) for the same quality, upstream says."""
    velocities: list[jax.Array | None] = [None, None]  # each stream's previous velocity

    def step_stream(
        step: int, modality: int, state: LatentState, denoised: jax.Array, sigma: np.float32, sigma_next: np.float32
    ) -> jax.Array:
        final = bool(sigma_next == 0)
        latent, velocities[modality] = _gradient_estimating_step(
            state, denoised, sigma, sigma_next, velocities[modality], ge_gamma=ge_gamma, final=final
        )
        return latent

    return _stream_by_stream_loop(
        sigmas, video, audio, denoiser, step_stream, description=description, progress=progress
    )


@functools.partial(jax.jit, static_argnames=("ge_gamma", "final"))
def _gradient_estimating_step(
    state: LatentState,
    denoised: jax.Array,
    sigma: jax.Array,
    sigma_next: jax.Array,
    previous: jax.Array | None,
    *,
    ge_gamma: float,
    final: bool,
) -> tuple[jax.Array, jax.Array]:
    """The next latent and this step's velocity, in the reference's roundings: velocities and the corrected
    prediction in the latent's dtype (`to_velocity`, `to_denoised`), computed in float32."""
    f32, dtype = jnp.float32, state.latent.dtype
    denoised = post_process_latent(denoised, state.denoise_mask, state.clean_latent)
    sample, sigma = state.latent.astype(f32), jnp.asarray(sigma, f32)
    velocity = ((sample - denoised.astype(f32)) / sigma).astype(dtype)
    if final:
        return denoised, velocity
    if previous is not None:
        total = previous + ge_gamma * (velocity - previous)  # in the latent's dtype, as the reference
        denoised = (sample - total.astype(f32) * sigma).astype(dtype)
    return euler_step(state.latent, denoised, sigma, sigma_next), velocity


def ancestral_noise(key: jax.Array, step: int, modality: int, latent: jax.Array) -> jax.Array:
    """Step `step`'s standard normal noise for `modality` (video 0, audio 1): float32 from `key`, in the
    latent's dtype, so a seed gives the same draws on any mesh."""
    stream = jax.random.fold_in(jax.random.fold_in(key, step), modality)
    return jax.random.normal(stream, jnp.shape(latent), jnp.float32).astype(latent.dtype)


@functools.partial(jax.jit, static_argnames=("eta", "s_noise", "final"))
def _ancestral_latent(
    state: LatentState,
    denoised: jax.Array,
    sigma: jax.Array,
    sigma_next: jax.Array,
    noise: jax.Array | None,
    *,
    eta: float,
    s_noise: float,
    final: bool,
) -> jax.Array:
    """One `EulerAncestralDiffusionStep` in float32 with the conditioning kept, in the reference's operation
    order; the `final` step (to sigma 0) is the prediction itself."""
    f32 = jnp.float32
    denoised = post_process_latent(denoised.astype(f32), state.denoise_mask, state.clean_latent)
    if final:
        return denoised.astype(state.latent.dtype)
    sigma, sigma_next = jnp.asarray(sigma, f32), jnp.asarray(sigma_next, f32)
    sigma_down = sigma_next * (1.0 + (sigma_next / sigma - 1.0) * eta)
    ratio = sigma_down / sigma
    latent = ratio * state.latent.astype(f32) + (1.0 - ratio) * denoised
    if noise is None:
        return latent.astype(state.latent.dtype)
    alpha_next, alpha_down = 1.0 - sigma_next, 1.0 - sigma_down
    renoise = jnp.sqrt(jnp.maximum(sigma_next**2 - sigma_down**2 * alpha_next**2 / alpha_down**2, 0.0))
    latent = (alpha_next / alpha_down) * latent + noise.astype(f32) * s_noise * renoise
    return post_process_latent(latent, state.denoise_mask, state.clean_latent).astype(state.latent.dtype)


def _checked(sigmas: Sequence[float] | np.ndarray) -> np.ndarray:
    sigmas = np.asarray(sigmas, np.float32)
    if sigmas.ndim != 1 or len(sigmas) < 2:
        raise ValueError(f"sigmas must be a 1-D schedule with at least 2 values, got shape {sigmas.shape}.")
    if np.any(sigmas[:-1] == 0):
        raise ValueError(f"sigmas may be 0 only at the end (x0 = x - v * sigma would stall), got {sigmas.tolist()}.")
    return sigmas
