"""Shapes of pixels and latents, and the latent state the sampler carries.

Source: `ltx_core/types.py`. Same names and arithmetic: the video VAE compresses 8x in time (the
first frame alone, causally) and 32x32 in space; audio latents run at
`sample_rate / hop_length / downsample = 16000 / 160 / 4 = 25` per second.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax


class SpatioTemporalScaleFactors(NamedTuple):
    """Pixels per latent along (time, width, height), as ltx-core orders them."""

    time: int = 8
    width: int = 32
    height: int = 32


VIDEO_SCALE_FACTORS = SpatioTemporalScaleFactors()


class VideoPixelShape(NamedTuple):
    batch: int
    frames: int
    height: int
    width: int
    fps: float


class VideoLatentShape(NamedTuple):
    """`(batch, channels, frames, height, width)` of a video latent."""

    batch: int
    channels: int
    frames: int
    height: int
    width: int

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return (self.batch, self.channels, self.frames, self.height, self.width)

    def token_count(self) -> int:
        return self.frames * self.height * self.width

    @staticmethod
    def from_pixel_shape(
        shape: VideoPixelShape,
        latent_channels: int = 128,
        scale_factors: SpatioTemporalScaleFactors = VIDEO_SCALE_FACTORS,
    ) -> VideoLatentShape:
        return VideoLatentShape(
            batch=shape.batch,
            channels=latent_channels,
            frames=(shape.frames - 1) // scale_factors.time + 1,
            height=shape.height // scale_factors.height,
            width=shape.width // scale_factors.width,
        )


class AudioLatentShape(NamedTuple):
    """`(batch, channels, frames, mel_bins)` of an audio latent; one token per latent frame."""

    batch: int
    channels: int
    frames: int
    mel_bins: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.channels, self.frames, self.mel_bins)

    def token_count(self) -> int:
        return self.frames

    @staticmethod
    def from_video_pixel_shape(
        shape: VideoPixelShape,
        channels: int = 8,
        mel_bins: int = 16,
        sample_rate: int = 16000,
        hop_length: int = 160,
        audio_latent_downsample_factor: int = 4,
    ) -> AudioLatentShape:
        latents_per_second = float(sample_rate) / float(hop_length) / float(audio_latent_downsample_factor)
        duration = float(shape.frames) / float(shape.fps)
        # Python's round (half to even), as ltx-core computes it.
        return AudioLatentShape(shape.batch, channels, round(duration * latents_per_second), mel_bins)


@dataclasses.dataclass(frozen=True)
class LatentState:
    """One modality's sampler state, patchified.

    Attributes:
        latent: `(B, T, C)` the noisy latent being denoised.
        denoise_mask: `(B, T, 1)` float32; 1 = generate, 0 = keep `clean_latent` (conditioning).
        positions: `(B, 3, T, 2)` video or `(B, 1, T, 2)` audio `[start, end)` bounds.
        clean_latent: `(B, T, C)` conditioning values where `denoise_mask` < 1.
        attention_mask: `(B, T, T)` self-attention weights in [0, 1] (IC-LoRA's attention strength),
            None: every token attends to every token.
        keyframes_mask: `(B, T, 1)` float32, 1 on the tokens that encode one pixel frame of the
            generated video (its first latent frame); models with the keyframe embedding add it
            there. None: no token is marked (audio).
        frozen: the whole stream is given, not generated (a2vid's audio): its denoise mask is 0 and
            the DiT sees it at sigma 0 (`ltx_pipelines/utils/helpers.py::modality_from_latent_state`).
    """

    latent: jax.Array
    denoise_mask: jax.Array
    positions: jax.Array
    clean_latent: jax.Array
    attention_mask: jax.Array | None = None
    keyframes_mask: jax.Array | None = None
    frozen: bool = False

    def replace(self, **changes: jax.Array | bool | None) -> LatentState:
        return dataclasses.replace(self, **changes)


jax.tree_util.register_dataclass(
    LatentState,
    data_fields=["latent", "denoise_mask", "positions", "clean_latent", "attention_mask", "keyframes_mask"],
    meta_fields=["frozen"],
)
