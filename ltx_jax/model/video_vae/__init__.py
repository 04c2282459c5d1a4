"""LTX-2's video VAE (conv encoder and decoder, tiled decoding; LTX-2.5's diffusion decoder) in Flax NNX.

Source: `ltx_core/model/video_vae/`. See docs/video_vae.md.
"""

from ltx_jax.model.video_vae.conv_video_decoder import VideoDecoder, decode_video
from ltx_jax.model.video_vae.diffusion_tiling import TileGeometry, check_tiling, recommended_tiling
from ltx_jax.model.video_vae.diffusion_video_decoder import DiffusionDecoderConfig, DiffusionVideoDecoder
from ltx_jax.model.video_vae.enums import LogVarianceType, NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.model_configurator import (
    diffusion_decoder_config,
    diffusion_vae_decoder_state_dict,
    diffusion_video_decoder_from_config,
    is_diffusion_vae,
    load_diffusion_video_decoder,
    vae_decoder_state_dict,
    vae_encoder_state_dict,
    video_decoder_from_config,
    video_encoder_from_config,
    video_latent_channels,
)
from ltx_jax.model.video_vae.ops import PerChannelStatistics, patchify, unpatchify
from ltx_jax.model.video_vae.tiling import DimensionSizeConfig, TileSizeConfig
from ltx_jax.model.video_vae.video_vae import SpatioTemporalScaleFactors, VideoEncoder

__all__ = [
    "DiffusionDecoderConfig",
    "DiffusionVideoDecoder",
    "DimensionSizeConfig",
    "LogVarianceType",
    "NormLayerType",
    "PaddingModeType",
    "PerChannelStatistics",
    "SpatioTemporalScaleFactors",
    "TileGeometry",
    "TileSizeConfig",
    "VideoDecoder",
    "VideoEncoder",
    "check_tiling",
    "decode_video",
    "diffusion_decoder_config",
    "diffusion_vae_decoder_state_dict",
    "diffusion_video_decoder_from_config",
    "is_diffusion_vae",
    "load_diffusion_video_decoder",
    "patchify",
    "recommended_tiling",
    "unpatchify",
    "vae_decoder_state_dict",
    "vae_encoder_state_dict",
    "video_decoder_from_config",
    "video_encoder_from_config",
    "video_latent_channels",
]
