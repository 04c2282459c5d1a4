"""One denoising stage: initial state, conditioning, noise, the sampler, and back to latents.

Source: `ltx_pipelines/utils/helpers.py::denoise_audio_video` (noise_video_state,
noise_audio_state, clear_conditioning, unpatchify). Video and audio noise come from one seed,
split into two keys, so a generation is reproducible on any mesh and in any process.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.modality import Modality
from ltx_jax.pipeline import patchifiers
from ltx_jax.pipeline.conditioning import Conditioning
from ltx_jax.pipeline.denoisers import Forward, GuidedDenoiser
from ltx_jax.pipeline.diffusion_steps import add_noise
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.res2s import res2s_denoising_loop
from ltx_jax.pipeline.samplers import (
    euler_ancestral_denoising_loop,
    euler_denoising_loop,
    gradient_estimating_euler_denoising_loop,
)
from ltx_jax.pipeline.types import AudioLatentShape, LatentState, VideoLatentShape, VideoPixelShape

Sampler = Literal["euler", "euler_ancestral", "res2s", "gradient_estimation"]
# The ancestral sampler's noise comes from the stage's key folded with this (the reference seeds its
# generator with seed + 10000, so that its first draw is not the initial noise's).
ANCESTRAL_NOISE_STREAM = 10000


@dataclasses.dataclass(frozen=True)
class LatentGeometry:
    """Latent sizes the VAEs define (production: 128 video channels; audio 8 channels x 16 mel bins)."""

    video_channels: int = 128
    audio_channels: int = 8
    audio_mel_bins: int = 16

    def video(self, shape: VideoPixelShape) -> VideoLatentShape:
        return VideoLatentShape.from_pixel_shape(shape, self.video_channels)

    def audio(self, shape: VideoPixelShape) -> AudioLatentShape:
        return AudioLatentShape.from_video_pixel_shape(shape, self.audio_channels, self.audio_mel_bins)


@dataclasses.dataclass(frozen=True)
class PromptEmbeddings:
    """`(B, S, D)` contexts for the DiT; None for a modality the model does not have."""

    video: jax.Array | None
    audio: jax.Array | None


@dataclasses.dataclass(frozen=True)
class Guidance:
    """Guidance of each modality (the defaults run only the conditional pass: no guidance)."""

    video: MultiModalGuiderParams = MultiModalGuiderParams()
    audio: MultiModalGuiderParams = MultiModalGuiderParams()

    def needs_negative_prompt(self) -> bool:
        """Whether CFG contrasts with a negative prompt (a cfg scale != 1)."""
        return self.video.do_unconditional_generation() or self.audio.do_unconditional_generation()


def denoise_audio_video(
    forward: Forward,
    shape: VideoPixelShape,
    sigmas: np.ndarray,
    key: jax.Array,
    prompt: PromptEmbeddings,
    *,
    geometry: LatentGeometry,
    dtype: jnp.dtype,
    guidance: Guidance = Guidance(),
    negative: PromptEmbeddings | None = None,
    conditionings: Sequence[Conditioning] = (),
    initial_video_latent: np.ndarray | None = None,
    initial_audio_latent: np.ndarray | None = None,
    noise_scale: float = 1.0,
    max_batch_size: int | None = None,
    description: str = "denoising",
    sampler: Sampler = "euler",
    audio_conditionings: Sequence[Conditioning] = (),
    frozen: tuple[bool, bool] = (False, False),
) -> tuple[jax.Array | None, jax.Array | None]:
    """Denoises from noise (or a noised initial latent) along `sigmas`, guided per `guidance` against
    the `negative` prompt's embeddings (needed when a cfg scale is not 1), with the Euler sampler, the
    ancestral one (its noise from `key` folded with `ANCESTRAL_NOISE_STREAM`), res_2s (`res2s.py`, the
    HQ flow's) or Euler with gradient estimation (ltx-pipelines' option; a flow's stage may choose it).
    `conditionings` apply to the video state, `audio_conditionings` to the audio's, before
    the noise (e.g. `keep_all`: the audio stays `initial_audio_latent`). A stream `frozen` (video,
    audio) is noised as given, then denoised nowhere (mask 0) and seen by the DiT at sigma 0.

    Returns the video latent `(B, C, F, H, W)` and audio latent `(B, C, T, M)` (None where the
    prompt has no context for that modality).
    """
    video_shape, audio_shape = geometry.video(shape), geometry.audio(shape)
    states = _initial_states(shape, prompt, geometry, dtype, conditionings, audio_conditionings, noise_scale)
    video, audio = (
        _frozen(state) if freeze else state
        for state, freeze in zip(states(key, initial_video_latent, initial_audio_latent), frozen, strict=True)
    )
    denoiser = _denoiser(forward, prompt, negative, guidance, max_batch_size)
    if sampler == "euler_ancestral":
        noise_key = jax.random.fold_in(key, ANCESTRAL_NOISE_STREAM)
        video, audio = euler_ancestral_denoising_loop(
            sigmas, video, audio, denoiser, noise_key, description=description
        )
    else:
        loops = {"res2s": res2s_denoising_loop, "gradient_estimation": gradient_estimating_euler_denoising_loop}
        loop = loops.get(sampler, euler_denoising_loop)
        video, audio = loop(sigmas, video, audio, denoiser, description=description)
    video_latent = audio_latent = None
    if video is not None:
        video = patchifiers.clear_conditioning(video, video_shape.token_count())
        video_latent = jnp.asarray(patchifiers.unpatchify_video(np.asarray(video.latent), video_shape))
    if audio is not None:  # without appended reference tokens (Dub-It's), as the video
        audio = patchifiers.clear_conditioning(audio, audio_shape.token_count())
        audio_latent = jnp.asarray(patchifiers.unpatchify_audio(np.asarray(audio.latent), audio_shape))
    return video_latent, audio_latent


def first_forward_inputs(
    shape: VideoPixelShape,
    prompt: PromptEmbeddings,
    *,
    geometry: LatentGeometry,
    dtype: jnp.dtype,
    guidance: Guidance = Guidance(),
    negative: PromptEmbeddings | None = None,
    conditionings: Sequence[Conditioning] = (),
    audio_conditionings: Sequence[Conditioning] = (),
    max_batch_size: int | None = None,
) -> tuple[Modality | None, Modality | None, BatchedPerturbationConfig]:
    """The shapes and dtypes (`jax.ShapeDtypeStruct`s) of what `denoise_audio_video` with these
    arguments passes to the DiT first (every modality enabled: a guidance that skips the first step
    runs other programs), with its perturbations: traced, nothing runs on the devices. The initial
    latents and the noise change values, not shapes, so they are left out."""
    states = _initial_states(shape, prompt, geometry, dtype, conditionings, audio_conditionings)
    denoiser = _denoiser(None, prompt, negative, guidance, max_batch_size)
    perturbations = []  # static, not a pytree: taken out of the trace

    def first() -> tuple[Modality | None, Modality | None]:
        video, audio, batched = denoiser.first_forward_inputs(*states(jax.random.key(0), None, None), sigma=1.0)
        perturbations.append(batched)
        return video, audio

    video, audio = jax.eval_shape(first)
    return video, audio, perturbations[0]


def _initial_states(
    shape: VideoPixelShape,
    prompt: PromptEmbeddings,
    geometry: LatentGeometry,
    dtype: jnp.dtype,
    conditionings: Sequence[Conditioning],
    audio_conditionings: Sequence[Conditioning],
    noise_scale: float = 1.0,
) -> Callable[..., tuple[LatentState | None, LatentState | None]]:
    """`(key, initial video latent, initial audio latent) -> (video state, audio state)`: conditioned,
    then noised from `key` (None for a modality the prompt has no context for)."""
    video_shape, audio_shape = geometry.video(shape), geometry.audio(shape)

    def states(key: jax.Array, video_latent: np.ndarray | None, audio_latent: np.ndarray | None) -> tuple:
        video = audio = None
        if prompt.video is not None:
            video = patchifiers.initial_video_state(video_shape, shape.fps, video_latent, dtype)
            for condition in conditionings:
                video = condition(video, video_shape)
            video = _noised(video, key, 0, noise_scale, dtype)
        if prompt.audio is not None:
            audio = patchifiers.initial_audio_state(audio_shape, audio_latent, dtype)
            for condition in audio_conditionings:
                audio = condition(audio, audio_shape)
            audio = _noised(audio, key, 1, noise_scale, dtype)
        return video, audio

    return states


def _frozen(state: LatentState | None) -> LatentState | None:
    """`state` kept whole from here on (`ltx_pipelines/utils/blocks.py::_build_state` with `frozen`)."""
    if state is None:
        return None
    return state.replace(denoise_mask=np.zeros_like(np.asarray(state.denoise_mask)), frozen=True)


def _denoiser(
    forward: Forward | None,
    prompt: PromptEmbeddings,
    negative: PromptEmbeddings | None,
    guidance: Guidance,
    max_batch_size: int | None,
) -> GuidedDenoiser:
    negative = negative or PromptEmbeddings(None, None)
    return GuidedDenoiser(
        forward, prompt.video, prompt.audio, negative.video, negative.audio, guidance.video, guidance.audio,
        max_batch_size,
    )  # fmt: skip


def _noised(state: LatentState, key: jax.Array, modality: int, noise_scale: float, dtype: jnp.dtype) -> LatentState:
    """`state` in `dtype`, noised from the `modality`-th (video 0, audio 1) of the two keys `key` splits
    into, on the device, except its denoise mask: that stays as it was, on the host, where the denoiser
    reads it (`denoisers.every_token_generated`)."""
    return _noised_on_device(state, key, modality, noise_scale, dtype).replace(denoise_mask=state.denoise_mask)


@functools.partial(jax.jit, static_argnames=("modality", "dtype"))
def _noised_on_device(
    state: LatentState, key: jax.Array, modality: int, noise_scale: float, dtype: jnp.dtype
) -> LatentState:
    """`_noised` with every field on the device. One program: op by op, its programs were each compiled
    (cold) or read from the cache (warm) on the main thread before a stage's first step
    (benchmarks/results/2026-12-03/README.md, "Sixth round")."""
    state = jax.tree.map(jnp.asarray, state)  # under jit a no-op; op by op (a test records the noise) JAX arrays
    state = state.replace(latent=state.latent.astype(dtype), clean_latent=state.clean_latent.astype(dtype))
    return add_noise(state, initial_noise(key, modality, state.latent.shape, dtype), noise_scale)


def initial_noise(key: jax.Array, modality: int, shape: tuple[int, ...], dtype: jnp.dtype) -> jax.Array:
    """A stage's initial noise for `modality` (video 0, audio 1): float32 standard normal from the
    `modality`-th of the two keys `key` splits into, in `dtype`."""
    return jax.random.normal(jax.random.split(key)[modality], shape, jnp.float32).astype(dtype)
