"""Residual block of the latent upsampler, and the `torch.nn.GroupNorm` it uses.

Source: `ltx_core/model/upsampler/res_block.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.conv import Conv


def group_norm(x: jax.Array, num_groups: int, weight: jax.Array, bias: jax.Array, eps: float = 1e-5) -> jax.Array:
    """`torch.nn.functional.group_norm` on (B, C, *spatial): biased variance, computed in float32."""
    b, c, *spatial = x.shape
    xf = x.astype(jnp.float32).reshape(b, num_groups, -1)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    out = ((xf - mean) * jax.lax.rsqrt(var + eps)).reshape(b, c, *spatial)
    shape = (1, c) + (1,) * len(spatial)
    return (out * weight.astype(jnp.float32).reshape(shape) + bias.astype(jnp.float32).reshape(shape)).astype(x.dtype)


class GroupNorm(nnx.Module):
    """`torch.nn.GroupNorm(num_groups, num_channels)` with affine `weight` and `bias` (C,)."""

    def __init__(
        self, num_groups: int, num_channels: int, *, eps: float = 1e-5, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        if num_channels % num_groups:
            raise ValueError(
                f"num_channels={num_channels} is not divisible by num_groups={num_groups}; "
                f"use a channel count that is a multiple of {num_groups}."
            )
        self.num_groups, self.eps = num_groups, eps
        self.weight = nnx.Param(jnp.ones((num_channels,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        return group_norm(x, self.num_groups, self.weight[...], self.bias[...], self.eps)


class ResBlock(nnx.Module):
    """`silu(norm2(conv2(silu(norm1(conv1(x))))) + x)` with 3x3(x3) convs; shape-preserving."""

    def __init__(
        self,
        channels: int,
        mid_channels: int | None = None,
        dims: int = 3,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        mid_channels = channels if mid_channels is None else mid_channels
        conv = {"ndim": dims, "padding": 1, "rngs": rngs, "param_dtype": param_dtype}
        self.conv1 = Conv(channels, mid_channels, 3, **conv)
        self.norm1 = GroupNorm(32, mid_channels, param_dtype=param_dtype)
        self.conv2 = Conv(mid_channels, channels, 3, **conv)
        self.norm2 = GroupNorm(32, channels, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        """(B, C, [F,] H, W) -> same shape."""
        h = jax.nn.silu(self.norm1(self.conv1(x)))
        return jax.nn.silu(self.norm2(self.conv2(h)) + x)
