"""The audio decoder's upsampling path: residual blocks, optional attention, 2x nearest upsampling.

Source: `ltx_core/model/audio_vae/upsample.py`. Keys: `up.<level>.block.<i>`, `up.<level>.attn.<i>`,
`up.<level>.upsample.conv.conv.*`; `up[0]` is the last (highest-resolution) stage run.
"""

from __future__ import annotations

from collections.abc import Collection

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.attention import AttentionType, make_attn
from ltx_jax.model.audio_vae.causal_conv_2d import make_conv2d
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.audio_vae.resnet import ResnetBlock
from ltx_jax.model.common.normalization import NormType


class Upsample(nnx.Module):
    """2x nearest upsampling of H and W, then a 3x3 (causal) conv; a causal H or W axis drops its first
    element, so a length `n` becomes `2n - 1` (the inverse of the encoder's causal padding)."""

    def __init__(
        self,
        in_channels: int,
        with_conv: bool,
        causality_axis: CausalityAxis = CausalityAxis.HEIGHT,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if not isinstance(causality_axis, CausalityAxis):
            raise ValueError(
                f"causality_axis={causality_axis!r} is not a CausalityAxis; use one of {list(CausalityAxis)}."
            )
        self.with_conv, self.causality_axis = with_conv, causality_axis
        if with_conv:
            self.conv = make_conv2d(
                in_channels,
                in_channels,
                kernel_size=3,
                stride=1,
                causality_axis=causality_axis,
                rngs=rngs,
                param_dtype=param_dtype,
            )

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, H, W) -> (B, C, 2H, 2W), less one element along a causal H or W."""
        x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)
        if not self.with_conv:
            return x
        x = self.conv(x)
        # The first two outputs see only the first input (causal padding), so the first is the redundant
        # one; WIDTH_COMPATIBILITY keeps it, as ltx-core does.
        if self.causality_axis == CausalityAxis.HEIGHT:
            return x[:, :, 1:, :]
        if self.causality_axis == CausalityAxis.WIDTH:
            return x[:, :, :, 1:]
        return x


class UpStage(nnx.Module):
    """One resolution level: `block` (ResnetBlocks), `attn` (one per block, or empty), `upsample` (not at level 0)."""

    def __init__(self, block: list[ResnetBlock], attn: list[nnx.Module], upsample: Upsample | None) -> None:
        self.block = nnx.List(block)
        self.attn = nnx.List(attn)
        if upsample is not None:
            self.upsample = upsample

    def __call__(self, h: jax.Array) -> jax.Array:
        for idx, block in enumerate(self.block):
            h = block(h)
            if self.attn:
                h = self.attn[idx](h)
        return self.upsample(h) if hasattr(self, "upsample") else h


def build_upsampling_path(  # noqa: PLR0913 - ltx-core's signature
    *,
    ch: int,
    ch_mult: tuple[int, ...],
    num_resolutions: int,
    num_res_blocks: int,
    resolution: int,
    norm_type: NormType,
    causality_axis: CausalityAxis,
    attn_type: AttentionType,
    attn_resolutions: Collection[int],
    resamp_with_conv: bool,
    initial_block_channels: int,
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype = jnp.float32,
) -> tuple[nnx.List, int]:
    """(stages indexed by level, channels of the last stage). Attention goes where the running
    resolution (`resolution / 2**(num_resolutions-1)`, doubling per level) is in `attn_resolutions`."""
    stages: list[UpStage] = []
    block_in = initial_block_channels
    curr_res = resolution // (2 ** (num_resolutions - 1))
    for level in reversed(range(num_resolutions)):
        block_out = ch * ch_mult[level]
        blocks, attns = [], []
        for _ in range(num_res_blocks + 1):
            blocks.append(
                ResnetBlock(
                    in_channels=block_in,
                    out_channels=block_out,
                    norm_type=norm_type,
                    causality_axis=causality_axis,
                    rngs=rngs,
                    param_dtype=param_dtype,
                )
            )
            block_in = block_out
            if curr_res in attn_resolutions:
                attns.append(
                    make_attn(block_in, attn_type=attn_type, norm_type=norm_type, rngs=rngs, param_dtype=param_dtype)
                )
        upsample = None
        if level != 0:
            upsample = Upsample(
                block_in, resamp_with_conv, causality_axis=causality_axis, rngs=rngs, param_dtype=param_dtype
            )
            curr_res *= 2
        stages.insert(0, UpStage(blocks, attns, upsample))
    return nnx.List(stages), block_in
