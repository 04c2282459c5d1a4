"""The audio encoder's downsampling path: residual blocks, optional attention, 2x strided-conv downsampling.

Source: `ltx_core/model/audio_vae/downsample.py`. Keys: `down.<level>.block.<i>`, `down.<level>.attn.<i>`,
`down.<level>.downsample.conv.*` (a plain strided conv, not a `CausalConv2d`); `down[0]` runs first.
"""

from __future__ import annotations

from collections.abc import Collection

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.attention import AttentionType, make_attn
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.audio_vae.resnet import ResnetBlock
from ltx_jax.model.common.normalization import NormType
from ltx_jax.model.conv import Conv

# ltx-core's zero padding before the stride-2 3x3 conv, as ((top, bottom), (left, right)) of (B, C, H, W).
# A causal axis is padded by 2 on the past side, so output t sees inputs <= 2t; WIDTH_COMPATIBILITY pads
# only 1 there, as older checkpoints were trained.
_PADDING = {
    CausalityAxis.NONE: ((0, 1), (0, 1)),
    CausalityAxis.WIDTH: ((0, 1), (2, 0)),
    CausalityAxis.HEIGHT: ((2, 0), (0, 1)),
    CausalityAxis.WIDTH_COMPATIBILITY: ((0, 1), (1, 0)),
}


class Downsample(nnx.Module):
    """Halves H and W: zero-pad asymmetrically then a 3x3 stride-2 conv (`with_conv`), or 2x2 average pooling.

    A length `n` becomes `ceil(n / 2)` along the causal axis of HEIGHT (H) or WIDTH (W), `floor(n / 2)`
    otherwise (WIDTH_COMPATIBILITY's W included).
    """

    def __init__(
        self,
        in_channels: int,
        with_conv: bool,
        causality_axis: CausalityAxis = CausalityAxis.WIDTH,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if causality_axis not in _PADDING:
            raise ValueError(
                f"causality_axis={causality_axis!r} is not a CausalityAxis; use one of {list(CausalityAxis)}."
            )
        if causality_axis != CausalityAxis.NONE and not with_conv:
            raise ValueError(
                f"Downsampling without a conv (resamp_with_conv=False) cannot be causal (causality_axis="
                f"{causality_axis.value!r}); set resamp_with_conv=True or causality_axis=None."
            )
        self.with_conv, self.causality_axis = with_conv, causality_axis
        if with_conv:
            self.conv = Conv(
                in_channels, in_channels, 3, ndim=2, stride=2, padding=0, rngs=rngs, param_dtype=param_dtype
            )

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, H, W) -> (B, C, H', W'), H' and W' about half (see the class docstring)."""
        if self.with_conv:
            return self.conv(jnp.pad(x, ((0, 0), (0, 0), *_PADDING[self.causality_axis])))
        # torch's avg_pool2d(kernel 2, stride 2) drops an odd last row / column.
        b, c, h, w = x.shape
        x = x[:, :, : h - h % 2, : w - w % 2].reshape(b, c, h // 2, 2, w // 2, 2)
        return jnp.mean(x, axis=(3, 5))


class DownStage(nnx.Module):
    """One resolution level: `block` (ResnetBlocks), `attn` (one per block, or empty), `downsample` (not last)."""

    def __init__(self, block: list[ResnetBlock], attn: list[nnx.Module], downsample: Downsample | None) -> None:
        self.block = nnx.List(block)
        self.attn = nnx.List(attn)
        if downsample is not None:
            self.downsample = downsample

    def __call__(self, h: jax.Array) -> jax.Array:
        for idx, block in enumerate(self.block):
            h = block(h)
            if self.attn:
                h = self.attn[idx](h)
        return self.downsample(h) if hasattr(self, "downsample") else h


def build_downsampling_path(  # noqa: PLR0913 - ltx-core's signature
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
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype = jnp.float32,
) -> tuple[nnx.List, int]:
    """(stages indexed by level, channels of the last stage). Attention goes where the running
    resolution (`resolution`, halving per level) is in `attn_resolutions`."""
    stages: list[DownStage] = []
    in_ch_mult = (1, *ch_mult)
    curr_res = resolution
    block_in = ch
    for level in range(num_resolutions):
        block_in, block_out = ch * in_ch_mult[level], ch * ch_mult[level]
        blocks, attns = [], []
        for _ in range(num_res_blocks):
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
        downsample = None
        if level != num_resolutions - 1:
            downsample = Downsample(
                block_in, resamp_with_conv, causality_axis=causality_axis, rngs=rngs, param_dtype=param_dtype
            )
            curr_res //= 2
        stages.append(DownStage(blocks, attns, downsample))
    return nnx.List(stages), block_in
