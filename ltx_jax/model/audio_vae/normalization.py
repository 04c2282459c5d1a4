"""The audio VAE's norms: GroupNorm and PixelNorm, chosen by `NormType`.

Source: `ltx_core/model/common/normalization.py` (`build_normalization_layer`, `PixelNorm`) and
`torch.nn.GroupNorm`. Activations are channels first, `(B, C, *spatial)`. Both norms compute in
float32 and return the input dtype.
"""

from enum import Enum

import jax
import jax.numpy as jnp
from flax import nnx

GROUP_NORM_EPS = 1e-6
PIXEL_NORM_EPS = 1e-6


class NormType(Enum):
    """GROUP (`torch.nn.GroupNorm`, affine) or PIXEL (per-location RMS norm over channels)."""

    GROUP = "group"
    PIXEL = "pixel"


class PixelNorm(nnx.Module):
    """`x / sqrt(mean(x^2 over channels) + eps)` at every location; no parameters."""

    def __init__(self, eps: float = PIXEL_NORM_EPS) -> None:
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        mean_sq = jnp.mean(xf * xf, axis=1, keepdims=True)
        return (xf / jnp.sqrt(mean_sq + self.eps)).astype(x.dtype)


class GroupNorm(nnx.Module):
    """`torch.nn.GroupNorm(num_groups, channels, eps, affine=True)`: parameters `weight`, `bias` (C,)."""

    def __init__(
        self, num_groups: int, num_channels: int, *, eps: float = GROUP_NORM_EPS, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        if num_channels % num_groups:
            raise ValueError(
                f"GroupNorm needs num_channels={num_channels} divisible by num_groups={num_groups}; "
                "use channel counts that are multiples of 32 or norm_type='pixel'."
            )
        self.num_groups, self.eps = num_groups, eps
        self.weight = nnx.Param(jnp.ones((num_channels,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        b, c, *spatial = x.shape
        xf = x.astype(jnp.float32).reshape(b, self.num_groups, -1)
        mean = jnp.mean(xf, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
        out = ((xf - mean) * jax.lax.rsqrt(var + self.eps)).reshape(b, c, *spatial)
        affine = (1, c) + (1,) * len(spatial)
        out = out * self.weight[...].astype(jnp.float32).reshape(affine) + self.bias[...].astype(jnp.float32).reshape(
            affine
        )
        return out.astype(x.dtype)


def build_normalization_layer(
    in_channels: int, *, num_groups: int = 32, normtype: NormType = NormType.GROUP, param_dtype: jnp.dtype = jnp.float32
) -> GroupNorm | PixelNorm:
    """A GroupNorm (32 groups, eps 1e-6) or a PixelNorm (eps 1e-6), as ltx-core builds them."""
    if normtype == NormType.GROUP:
        return GroupNorm(num_groups, in_channels, param_dtype=param_dtype)
    if normtype == NormType.PIXEL:
        return PixelNorm()
    raise ValueError(f"normtype={normtype!r} is not a NormType; use NormType.GROUP or NormType.PIXEL.")
