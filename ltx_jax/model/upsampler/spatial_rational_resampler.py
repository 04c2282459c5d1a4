"""Rational spatial scaling: up by `num` with a pixel shuffle, then blur-downsample by `den`.

Source: `ltx_core/model/upsampler/spatial_rational_resampler.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.conv import Conv
from ltx_jax.model.upsampler.blur_downsample import BlurDownsample, batch_to_frames, frames_to_batch
from ltx_jax.model.upsampler.pixel_shuffle import PixelShuffleND

RATIONAL_SCALES: dict[float, tuple[int, int]] = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}


def rational_for_scale(scale: float) -> tuple[int, int]:
    """`scale` -> (num, den) with scale = num / den, for the scales ltx-core supports."""
    if float(scale) not in RATIONAL_SCALES:
        raise ValueError(f"spatial_scale={scale!r} is not supported; choose one of {sorted(RATIONAL_SCALES)}.")
    return RATIONAL_SCALES[float(scale)]


class SpatialRationalResampler(nnx.Module):
    """Per-frame `conv (C -> num^2 C) -> pixel shuffle (num) -> blur downsample (den)` on H, W."""

    def __init__(
        self, mid_channels: int, scale: float, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        self.scale = float(scale)
        self.num, self.den = rational_for_scale(self.scale)
        self.conv = Conv(
            mid_channels, self.num**2 * mid_channels, 3, ndim=2, padding=1, rngs=rngs, param_dtype=param_dtype
        )
        self.pixel_shuffle = PixelShuffleND(2, upscale_factors=(self.num, self.num))
        self.blur_down = BlurDownsample(dims=2, stride=self.den)

    def __call__(self, x: jax.Array) -> jax.Array:
        """(B, C, F, H, W) -> (B, C, F, ceil(H * num / den), ceil(W * num / den))."""
        y = self.blur_down(self.pixel_shuffle(self.conv(frames_to_batch(x))))
        return batch_to_frames(y, x.shape[0])
