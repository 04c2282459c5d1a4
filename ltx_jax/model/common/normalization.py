"""Channel-first norms shared by the video VAE, the audio VAE and the upsampler.

Source: `ltx_core/model/common/normalization.py` (`NormType`, `PixelNorm`, `build_normalization_layer`)
and `torch.nn.GroupNorm`. Activations are `(B, C, *spatial)`. Both norms compute in float32 and
return the input dtype (torch computes float32 inputs in float32; the upcast only matters for bf16).
"""

from __future__ import annotations

from enum import Enum

import jax
import jax.numpy as jnp
from flax import nnx

BUILD_EPS = 1e-6  # build_normalization_layer's eps for both norms (the audio VAE)


class NormType(Enum):
    """GROUP (`torch.nn.GroupNorm`, affine) or PIXEL (per-location RMS norm over channels)."""

    GROUP = "group"
    PIXEL = "pixel"


class PixelNorm(nnx.Module):
    """`x / sqrt(mean(x^2 over channels) + eps)` at every location; no parameters."""

    def __init__(self, eps: float = 1e-8) -> None:
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        # sqrt then divide (not rsqrt) to round like torch's `x / torch.sqrt(...)`.
        return (xf / jnp.sqrt(jnp.mean(xf * xf, axis=1, keepdims=True) + self.eps)).astype(x.dtype)


def group_norm(x: jax.Array, num_groups: int, weight: jax.Array, bias: jax.Array, eps: float) -> jax.Array:
    """`torch.nn.functional.group_norm` on (B, C, *spatial): biased variance, computed in float32."""
    b, c, *spatial = x.shape
    xf = x.astype(jnp.float32).reshape(b, num_groups, -1)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    out = ((xf - mean) * jax.lax.rsqrt(var + eps)).reshape(b, c, *spatial)
    shape = (1, c) + (1,) * len(spatial)
    return (out * weight.astype(jnp.float32).reshape(shape) + bias.astype(jnp.float32).reshape(shape)).astype(x.dtype)


class GroupNorm(nnx.Module):
    """`torch.nn.GroupNorm(num_groups, num_channels, eps, affine=True)`: parameters `weight`, `bias` (C,)."""

    def __init__(
        self, num_groups: int, num_channels: int, *, eps: float = 1e-5, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        if num_channels % num_groups:
            raise ValueError(
                f"GroupNorm needs num_channels={num_channels} divisible by num_groups={num_groups}; use channel "
                f"counts that are multiples of {num_groups} (or a pixel norm where the model offers one)."
            )
        self.num_groups, self.eps = num_groups, eps
        self.weight = nnx.Param(jnp.ones((num_channels,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        return group_norm(x, self.num_groups, self.weight[...], self.bias[...], self.eps)


def build_normalization_layer(
    in_channels: int, *, num_groups: int = 32, normtype: NormType = NormType.GROUP, param_dtype: jnp.dtype = jnp.float32
) -> GroupNorm | PixelNorm:
    """A GroupNorm (32 groups) or a PixelNorm, both with eps 1e-6, as ltx-core builds them."""
    if normtype == NormType.GROUP:
        return GroupNorm(num_groups, in_channels, eps=BUILD_EPS, param_dtype=param_dtype)
    if normtype == NormType.PIXEL:
        return PixelNorm(eps=BUILD_EPS)
    raise ValueError(f"normtype={normtype!r} is not a NormType; use NormType.GROUP or NormType.PIXEL.")
