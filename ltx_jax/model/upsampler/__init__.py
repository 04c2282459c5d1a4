"""The latent upsampler: `LatentUpsampler`, its configurator and `upsample_video`."""

from ltx_jax.model.upsampler.model import LatentUpsampler, upsample_video
from ltx_jax.model.upsampler.model_configurator import LatentUpsamplerConfigurator

__all__ = ["LatentUpsampler", "LatentUpsamplerConfigurator", "upsample_video"]
