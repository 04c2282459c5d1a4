"""Video VAE encoder: (B, 3, 1 + 8k, H, W) pixels in [-1, 1] -> (B, 128, 1 + k, H / 32, W / 32) latents.

Source: `ltx_core/model/video_vae/video_vae.py` (`VideoEncoder`, `_make_encoder_block`) and
`ltx_core/types.py::SpatioTemporalScaleFactors`. Upstream ltx-core moved the conv decoder into
`conv_video_decoder.py`; ours lives there too.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.video_vae.attention import AttnBlock3D
from ltx_jax.model.video_vae.convolution import CausalConv3d
from ltx_jax.model.video_vae.enums import LogVarianceType, NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.normalization import make_norm
from ltx_jax.model.video_vae.ops import PerChannelStatistics, patchify
from ltx_jax.model.video_vae.resnet import ResnetBlock3D, UNetMidBlock3D
from ltx_jax.model.video_vae.sampling import SpaceToDepthDownsample

logger = logging.getLogger(__name__)

NORM_NUM_GROUPS = 32  # ltx-core's `_DEFAULT_NORM_NUM_GROUPS`
Blocks = list[tuple[str, int | dict[str, Any]]]


class SpatioTemporalScaleFactors(NamedTuple):
    """Pixels per latent cell along (time, height, width); 8 x 32 x 32 for LTX-2."""

    time: int
    height: int
    width: int

    @classmethod
    def from_blocks(cls, blocks: Blocks, patch_size: int) -> SpatioTemporalScaleFactors:
        """Each `compress_*` block halves (encoder) or doubles (decoder) its axes; patchify adds `patch_size`."""
        spatial = sum(name.startswith(("compress_space", "compress_all")) for name, _ in blocks)
        temporal = sum(name.startswith(("compress_time", "compress_all")) for name, _ in blocks)
        return cls(time=2**temporal, height=patch_size * 2**spatial, width=patch_size * 2**spatial)


def block_config(params: int | dict[str, Any]) -> dict[str, Any]:
    """A block's params as ltx-core normalizes them: an int means `{"num_layers": int}`."""
    return {"num_layers": params} if isinstance(params, int) else params


_STRIDES = {"time": (2, 1, 1), "space": (1, 2, 2), "all": (2, 2, 2)}


def _make_encoder_block(
    name: str, config: dict[str, Any], channels: int, norm_layer: NormLayerType, common: dict[str, Any]
) -> tuple[nnx.Module, int]:
    """One `encoder_blocks` entry -> (module, output channels), as ltx-core's `_make_encoder_block`."""
    if name == "res_x":
        block = UNetMidBlock3D(
            channels, num_layers=config["num_layers"], resnet_groups=NORM_NUM_GROUPS, norm_layer=norm_layer, **common
        )
        return block, channels
    if name == "res_x_y":
        out = channels * config.get("multiplier", 2)
        return ResnetBlock3D(channels, out, groups=NORM_NUM_GROUPS, norm_layer=norm_layer, **common), out
    kind = name.removeprefix("compress_").removesuffix("_res").removesuffix("_x_y")
    if name in ("compress_time", "compress_space", "compress_all", "compress_all_x_y"):
        out = channels * config.get("multiplier", 2) if name == "compress_all_x_y" else channels
        return CausalConv3d(channels, out, 3, stride=_STRIDES[kind], **common), out
    if name in ("compress_time_res", "compress_space_res", "compress_all_res"):
        out = channels * config.get("multiplier", 2)
        return SpaceToDepthDownsample(channels, out, _STRIDES[kind], **common), out
    if name == "attn":
        return AttnBlock3D(channels, rngs=common["rngs"], param_dtype=common["param_dtype"]), channels
    raise ValueError(
        f"encoder block {name!r} is unknown; valid: res_x, res_x_y, compress_time, compress_space, compress_all, "
        "compress_all_x_y, compress_time_res, compress_space_res, compress_all_res, attn."
    )


class VideoEncoder(nnx.Module):
    """Patchify, `conv_in`, `down_blocks`, norm + SiLU, `conv_out`, then the normalized latent means.

    Parameter paths are ltx-core's (`conv_in.conv.weight`, `down_blocks.0.res_blocks.1.conv1.conv.bias`,
    `per_channel_statistics.std-of-means`, ...).
    """

    def __init__(
        self,
        *,
        in_channels: int = 3,
        out_channels: int = 128,
        encoder_blocks: Blocks = (),
        patch_size: int = 4,
        norm_layer: NormLayerType = NormLayerType.PIXEL_NORM,
        latent_log_var: LogVarianceType = LogVarianceType.UNIFORM,
        encoder_spatial_padding_mode: PaddingModeType = PaddingModeType.ZEROS,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if latent_log_var == LogVarianceType.NONE:
            raise ValueError(
                "latent_log_var='none' cannot run in ltx-core either (its means come out with half the "
                "channels of the statistics); use 'uniform', 'per_channel' or 'constant'."
            )
        self.patch_size, self.latent_channels, self.latent_log_var = patch_size, out_channels, latent_log_var
        self.video_scale_factors = SpatioTemporalScaleFactors.from_blocks(list(encoder_blocks), patch_size)
        self.per_channel_statistics = PerChannelStatistics(out_channels, param_dtype=param_dtype)
        common = {"spatial_padding_mode": encoder_spatial_padding_mode, "rngs": rngs, "param_dtype": param_dtype}
        self.conv_in = CausalConv3d(in_channels * patch_size**2, out_channels, 3, **common)
        channels, blocks = out_channels, []
        for name, params in encoder_blocks:
            block, channels = _make_encoder_block(name, block_config(params), channels, norm_layer, common)
            blocks.append(block)
        self.down_blocks = nnx.List(blocks)
        self.conv_norm_out = make_norm(norm_layer, channels, groups=NORM_NUM_GROUPS, eps=1e-6, param_dtype=param_dtype)
        conv_out_channels = {
            LogVarianceType.PER_CHANNEL: 2 * out_channels,
            LogVarianceType.UNIFORM: out_channels + 1,
            LogVarianceType.CONSTANT: out_channels + 1,
        }[latent_log_var]
        self.conv_out = CausalConv3d(channels, conv_out_channels, 3, **common)

    def __call__(self, sample: jax.Array) -> jax.Array:
        """(B, C, F, H, W) video in [-1, 1] -> (B, latent_channels, 1 + (F - 1) / t, H / s, W / s) normalized means.

        F should be 1 + t * k (t = 8 for LTX-2); like ltx-core, extra trailing frames are cropped
        with a warning. H and W must be multiples of s (32).
        """
        if sample.ndim != 5:
            raise ValueError(f"sample must be (B, C, F, H, W) video, got shape {sample.shape}.")
        t, s = self.video_scale_factors.time, self.video_scale_factors.height
        if sample.shape[3] % s or sample.shape[4] % s:
            raise ValueError(f"sample height and width {sample.shape[3:]} must be multiples of {s}; resize or crop.")
        crop = (sample.shape[2] - 1) % t
        if crop:
            logger.warning("Invalid number of frames %s for encode; cropping the last %s.", sample.shape[2], crop)
            sample = sample[:, :, :-crop]
        x = self.conv_in(patchify(sample, self.patch_size, 1))
        for block in self.down_blocks:
            x = block(x)
        x = self.conv_out(jax.nn.silu(self.conv_norm_out(x)))
        # The means are the first `latent_channels` channels in every log-variance layout.
        return self.per_channel_statistics.normalize(x[:, : self.latent_channels])
