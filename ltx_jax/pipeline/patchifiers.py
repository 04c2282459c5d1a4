"""Latents <-> tokens, token positions, and the initial sampler state.

Source: `ltx_core/components/patchifiers.py` and `ltx_core/tools.py` with the production patch size
of 1 (one token per latent voxel / audio latent frame). Positions are `[start, end)` bounds per axis:
video time in seconds (the first frame's causal shift applied), height and width in pixels; audio
time in seconds. Everything here is host-side numpy: it runs once per generation.
"""

from __future__ import annotations

import numpy as np

from ltx_jax.pipeline.types import (
    VIDEO_SCALE_FACTORS,
    AudioLatentShape,
    LatentState,
    SpatioTemporalScaleFactors,
    VideoLatentShape,
)

AUDIO_SAMPLE_RATE = 16000
AUDIO_HOP_LENGTH = 160
AUDIO_LATENT_DOWNSAMPLE = 4


def patchify_video(latent: np.ndarray) -> np.ndarray:
    """`(B, C, F, H, W)` -> `(B, F*H*W, C)`, frames outermost."""
    b, c = latent.shape[:2]
    return np.moveaxis(latent.reshape(b, c, -1), 1, 2)


def unpatchify_video(tokens: np.ndarray, shape: VideoLatentShape) -> np.ndarray:
    """`(B, F*H*W, C)` -> `(B, C, F, H, W)`."""
    b, _, c = tokens.shape
    return np.moveaxis(tokens, 1, 2).reshape(b, c, shape.frames, shape.height, shape.width)


def patchify_audio(latent: np.ndarray) -> np.ndarray:
    """`(B, C, T, F)` -> `(B, T, C*F)`, channels outermost in the feature axis."""
    b, c, t, f = latent.shape
    return np.moveaxis(latent, 2, 1).reshape(b, t, c * f)


def unpatchify_audio(tokens: np.ndarray, shape: AudioLatentShape) -> np.ndarray:
    """`(B, T, C*F)` -> `(B, C, T, F)`."""
    b, t, _ = tokens.shape
    return np.moveaxis(tokens.reshape(b, t, shape.channels, shape.mel_bins), 2, 1)


def video_positions(
    shape: VideoLatentShape,
    fps: float,
    scale_factors: SpatioTemporalScaleFactors = VIDEO_SCALE_FACTORS,
    causal_fix: bool = True,
) -> np.ndarray:
    """`(B, 3, F*H*W, 2)` float32 pixel-space bounds; time divided by `fps`."""
    grid = np.stack(
        np.meshgrid(np.arange(shape.frames), np.arange(shape.height), np.arange(shape.width), indexing="ij")
    ).reshape(3, -1)
    bounds = np.stack([grid, grid + 1], axis=-1)  # (3, T, 2) latent [start, end)
    scale = np.array([scale_factors.time, scale_factors.height, scale_factors.width]).reshape(3, 1, 1)
    pixels = (bounds * scale).astype(np.float32)
    if causal_fix:  # the first latent frame encodes one pixel frame, the others `time` frames each
        pixels[0] = np.maximum(pixels[0] + 1 - scale_factors.time, 0)
    pixels[0] = pixels[0] / np.float32(fps)
    return np.broadcast_to(pixels, (shape.batch, *pixels.shape)).copy()


def audio_positions(shape: AudioLatentShape, shift: int = 0) -> np.ndarray:
    """`(B, 1, T, 2)` float32 `[start, end)` seconds of each latent frame (causal alignment)."""

    def seconds(start: int, end: int) -> np.ndarray:
        mel = np.arange(start, end, dtype=np.float32) * AUDIO_LATENT_DOWNSAMPLE
        mel = np.clip(mel + 1 - AUDIO_LATENT_DOWNSAMPLE, 0, None)
        return mel * AUDIO_HOP_LENGTH / AUDIO_SAMPLE_RATE

    bounds = np.stack([seconds(shift, shape.frames + shift), seconds(shift + 1, shape.frames + shift + 1)], axis=-1)
    return np.broadcast_to(bounds, (shape.batch, 1, *bounds.shape)).astype(np.float32)


def initial_video_state(
    shape: VideoLatentShape, fps: float, initial_latent: np.ndarray | None = None, dtype: np.dtype = np.float32
) -> LatentState:
    """Zeros (or `initial_latent`) to denoise everywhere, as `VideoLatentTools.create_initial_state`,
    its first latent frame marked in `keyframes_mask`: the causal VAE encodes one pixel frame there, as
    in a keyframe (marked whatever the model; only models with the keyframe embedding read it)."""
    latent = _initial_latent(shape.shape, initial_latent, "initial_video_latent", dtype)
    tokens = patchify_video(latent)
    keyframes = np.zeros((*tokens.shape[:2], 1), np.float32)
    keyframes[:, : shape.height * shape.width] = 1.0
    return _state(tokens, video_positions(shape, fps)).replace(keyframes_mask=keyframes)


def initial_audio_state(
    shape: AudioLatentShape, initial_latent: np.ndarray | None = None, dtype: np.dtype = np.float32
) -> LatentState:
    latent = _initial_latent(shape.shape, initial_latent, "initial_audio_latent", dtype)
    return _state(patchify_audio(latent), audio_positions(shape))


def _initial_latent(shape: tuple[int, ...], given: np.ndarray | None, name: str, dtype: np.dtype) -> np.ndarray:
    if given is None:
        return np.zeros(shape, dtype)
    if tuple(given.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(given.shape)}; this generation's latent shape is {shape}.")
    return np.asarray(given, dtype)


def _state(tokens: np.ndarray, positions: np.ndarray) -> LatentState:
    mask = np.ones((*tokens.shape[:2], 1), np.float32)
    return LatentState(latent=tokens, denoise_mask=mask, positions=positions, clean_latent=tokens.copy())


def clear_conditioning(state: LatentState, token_count: int) -> LatentState:
    """Drops tokens appended by keyframe conditioning (they always sit past `token_count`)."""
    return LatentState(
        latent=state.latent[:, :token_count],
        denoise_mask=np.ones_like(np.asarray(state.denoise_mask)[:, :token_count]),
        positions=state.positions[:, :, :token_count],
        clean_latent=state.clean_latent[:, :token_count],
        keyframes_mask=None if state.keyframes_mask is None else state.keyframes_mask[:, :token_count],
    )
