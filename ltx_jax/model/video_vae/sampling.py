"""Space-to-depth downsampling (encoder) and depth-to-space upsampling (decoder).

Source: `ltx_core/model/video_vae/sampling.py`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from einops import rearrange
from flax import nnx

from ltx_jax.model.video_vae.convolution import CausalConv3d
from ltx_jax.model.video_vae.enums import PaddingModeType

_TO_DEPTH = "b c (d p1) (h p2) (w p3) -> b (c p1 p2 p3) d h w"
_TO_SPACE = "b (c p1 p2 p3) d h w -> b c (d p1) (h p2) (w p3)"


class SpaceToDepthDownsample(nnx.Module):
    """(B, C, F, H, W) -> (B, out, F / s_t, H / s_h, W / s_w): a causal conv folded into channels plus a
    channel-group-averaged space-to-depth skip. A temporal stride of 2 first duplicates frame 0, so
    1 + 2k frames give 1 + k."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        stride: tuple[int, int, int],
        *,
        spatial_padding_mode: PaddingModeType,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        self.stride = tuple(stride)
        self.group_size = in_channels * math.prod(stride) // out_channels
        self.conv = CausalConv3d(
            in_channels,
            out_channels // math.prod(stride),
            3,
            spatial_padding_mode=spatial_padding_mode,
            rngs=rngs,
            param_dtype=param_dtype,
        )

    def __call__(self, x: jax.Array, causal: bool = True) -> jax.Array:
        p1, p2, p3 = self.stride
        if p1 == 2:
            x = jnp.concatenate([x[:, :, :1], x], axis=2)
        skip = rearrange(x, _TO_DEPTH, p1=p1, p2=p2, p3=p3)
        skip = rearrange(skip, "b (c g) d h w -> b c g d h w", g=self.group_size).mean(axis=2)
        x = rearrange(self.conv(x, causal=causal), _TO_DEPTH, p1=p1, p2=p2, p3=p3)
        return x + skip


class DepthToSpaceUpsample(nnx.Module):
    """(B, C, F, H, W) -> (B, C / reduction, F * s_t - (s_t == 2), H * s_h, W * s_w): a causal conv to
    prod(stride) * C / reduction channels, unfolded into space/time; the first output frame is dropped
    when time doubles (the causal first frame). `residual` adds the unfolded, channel-tiled input."""

    def __init__(
        self,
        in_channels: int,
        stride: tuple[int, int, int],
        *,
        residual: bool,
        out_channels_reduction_factor: int,
        spatial_padding_mode: PaddingModeType,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        self.stride = tuple(stride)
        self.residual = residual
        self.out_channels_reduction_factor = out_channels_reduction_factor
        self.conv = CausalConv3d(
            in_channels,
            math.prod(stride) * in_channels // out_channels_reduction_factor,
            3,
            spatial_padding_mode=spatial_padding_mode,
            rngs=rngs,
            param_dtype=param_dtype,
        )

    def __call__(self, x: jax.Array, causal: bool = True) -> jax.Array:
        p1, p2, p3 = self.stride
        skip = None
        if self.residual:
            skip = rearrange(x, _TO_SPACE, p1=p1, p2=p2, p3=p3)
            # torch `repeat(1, n, 1, 1, 1)` tiles whole channel blocks.
            skip = jnp.tile(skip, (1, math.prod(self.stride) // self.out_channels_reduction_factor, 1, 1, 1))
            if p1 == 2:
                skip = skip[:, :, 1:]
        x = rearrange(self.conv(x, causal=causal), _TO_SPACE, p1=p1, p2=p2, p3=p3)
        if p1 == 2:
            x = x[:, :, 1:]
        return x if skip is None else x + skip
