"""Residual block of the latent upsampler.

Source: `ltx_core/model/upsampler/res_block.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.common.normalization import GroupNorm
from ltx_jax.model.conv import Conv


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
