"""Channel-first norms of the video VAE: `PixelNorm` and `torch.nn.GroupNorm`.

Source: `ltx_core/model/video_vae/normalization.py` (re-exports `ltx_core/model/common/normalization.py`)
and the `nn.GroupNorm` layers built in `resnet.py` / `video_vae.py`. Both compute in float32 and
return the input dtype (torch computes float32 inputs in float32; the upcast only matters for bf16).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.video_vae.enums import NormLayerType


class PixelNorm(nnx.Module):
    """`x / sqrt(mean(x^2 over channels) + eps)` on (B, C, ...) activations; no parameters."""

    def __init__(self, eps: float = 1e-8) -> None:
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        # sqrt then divide (not rsqrt) to round like torch's `x / torch.sqrt(...)`.
        return (xf / jnp.sqrt(jnp.mean(xf * xf, axis=1, keepdims=True) + self.eps)).astype(x.dtype)


class GroupNorm(nnx.Module):
    """`torch.nn.GroupNorm(num_groups, num_channels, eps, affine=True)` on (B, C, ...): `weight`, `bias` (C,)."""

    def __init__(self, num_groups: int, num_channels: int, *, eps: float, param_dtype: jnp.dtype) -> None:
        if num_channels % num_groups:
            raise ValueError(
                f"GroupNorm needs num_channels={num_channels} divisible by num_groups={num_groups}; "
                "use channel counts that are multiples of the group count (32 for the VAE's group_norm)."
            )
        self.num_groups, self.eps = num_groups, eps
        self.weight = nnx.Param(jnp.ones((num_channels,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        b, c, *spatial = x.shape
        xf = x.astype(jnp.float32).reshape(b, self.num_groups, -1)
        mean = jnp.mean(xf, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
        normed = ((xf - mean) * jax.lax.rsqrt(var + self.eps)).reshape(b, c, *spatial)
        shape = (1, c) + (1,) * len(spatial)
        out = normed * self.weight[...].astype(jnp.float32).reshape(shape) + self.bias[...].astype(jnp.float32).reshape(
            shape
        )
        return out.astype(x.dtype)


def make_norm(
    norm_layer: NormLayerType, channels: int, *, groups: int, eps: float, param_dtype: jnp.dtype
) -> PixelNorm | GroupNorm:
    """The norm ltx-core builds for `norm_layer`: GroupNorm(groups, channels, eps) or PixelNorm (its own eps 1e-8)."""
    if norm_layer == NormLayerType.GROUP_NORM:
        return GroupNorm(groups, channels, eps=eps, param_dtype=param_dtype)
    return PixelNorm()
