"""Anti-aliased integer-stride spatial downsampling with a fixed binomial kernel.

Source: `ltx_core/model/upsampler/blur_downsample.py`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.conv import conv_nd


def binomial_kernel(kernel_size: int) -> jax.Array:
    """The normalized outer product of Pascal's row `kernel_size - 1`, shaped (1, 1, k, k)."""
    row = jnp.array([math.comb(kernel_size - 1, i) for i in range(kernel_size)], jnp.float32)
    k2d = row[:, None] * row[None, :]
    return (k2d / k2d.sum())[None, None]


def frames_to_batch(x: jax.Array) -> jax.Array:
    """(B, C, F, H, W) -> (B*F, C, H, W), einops' `b c f h w -> (b f) c h w`."""
    b, c, f, h, w = x.shape
    return x.transpose(0, 2, 1, 3, 4).reshape(b * f, c, h, w)


def batch_to_frames(x: jax.Array, b: int) -> jax.Array:
    """(B*F, C, H, W) -> (B, C, F, H, W), the inverse of `frames_to_batch`."""
    bf, c, h, w = x.shape
    return x.reshape(b, bf // b, c, h, w).transpose(0, 2, 1, 3, 4)


class BlurDownsample(nnx.Module):
    """Depthwise binomial blur with stride `stride` on H, W; dims=3 inputs are blurred frame by frame.

    `kernel` is a torch buffer that ltx-core saves in its state dict (the x1.5 upscaler checkpoint
    carries `upsampler.blur_down.kernel`), so it is an `nnx.Param` here: `load_state_dict` then
    loads it like any other tensor. It starts at the binomial value ltx-core computes.
    """

    def __init__(self, dims: int, stride: int, kernel_size: int = 5) -> None:
        if dims not in (2, 3):
            raise ValueError(f"dims={dims!r}; BlurDownsample works on 2-d (B, C, H, W) or 3-d (B, C, F, H, W).")
        if not isinstance(stride, int) or stride < 1:
            raise ValueError(f"stride={stride!r} must be a positive integer.")
        if kernel_size < 3 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size={kernel_size!r} must be odd and at least 3.")
        self.dims, self.stride, self.kernel_size = dims, stride, kernel_size
        self.kernel = nnx.Param(binomial_kernel(kernel_size))

    def __call__(self, x: jax.Array) -> jax.Array:
        """(B, C, H, W) or (B, C, F, H, W) -> same rank with H, W divided by `stride` (rounded up)."""
        if self.stride == 1:
            return x
        if self.dims == 2:
            return self._apply_2d(x)
        return batch_to_frames(self._apply_2d(frames_to_batch(x)), x.shape[0])

    def _apply_2d(self, x: jax.Array) -> jax.Array:
        c = x.shape[1]
        weight = jnp.broadcast_to(self.kernel[...], (c, 1, self.kernel_size, self.kernel_size))
        return conv_nd(x, weight, stride=self.stride, padding=self.kernel_size // 2, groups=c)
