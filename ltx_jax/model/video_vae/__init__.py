"""LTX-2's video VAE (conv encoder and decoder, tiled decoding) in Flax NNX.

Source: `ltx_core/model/video_vae/`. See docs/video_vae.md.
"""

from ltx_jax.model.video_vae.conv_video_decoder import VideoDecoder, decode_video
from ltx_jax.model.video_vae.enums import LogVarianceType, NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.model_configurator import (
    vae_decoder_state_dict,
    vae_encoder_state_dict,
    video_decoder_from_config,
    video_encoder_from_config,
)
from ltx_jax.model.video_vae.ops import PerChannelStatistics, patchify, unpatchify
from ltx_jax.model.video_vae.tiling import DimensionSizeConfig, TileSizeConfig
from ltx_jax.model.video_vae.video_vae import SpatioTemporalScaleFactors, VideoEncoder

__all__ = [
    "DimensionSizeConfig",
    "LogVarianceType",
    "NormLayerType",
    "PaddingModeType",
    "PerChannelStatistics",
    "SpatioTemporalScaleFactors",
    "TileSizeConfig",
    "VideoDecoder",
    "VideoEncoder",
    "decode_video",
    "patchify",
    "unpatchify",
    "vae_decoder_state_dict",
    "vae_encoder_state_dict",
    "video_decoder_from_config",
    "video_encoder_from_config",
]
