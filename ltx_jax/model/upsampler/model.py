"""The latent upsampler (spatial x2 / x1.5 / x4, temporal x2) and the normalize-around-it helper.

Source: `ltx_core/model/upsampler/model.py` (`LatentUpsampler`, `upsample_video`). Parameter paths
equal the keys of the upsampler's own safetensors file (no prefix): `initial_conv.weight`,
`res_blocks.0.norm1.bias`, `upsampler.0.weight` (or `upsampler.conv.weight` with the rational
resampler), `post_upsample_res_blocks.3.conv2.weight`, `final_conv.bias`, ...
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.common.normalization import GroupNorm
from ltx_jax.model.conv import Conv
from ltx_jax.model.upsampler.blur_downsample import batch_to_frames, frames_to_batch
from ltx_jax.model.upsampler.pixel_shuffle import PixelShuffleND
from ltx_jax.model.upsampler.res_block import ResBlock
from ltx_jax.model.upsampler.spatial_rational_resampler import SpatialRationalResampler, rational_for_scale


def _check_arguments(
    mid_channels: int, dims: int, spatial_upsample: bool, temporal_upsample: bool, spatial_scale: float, rational: bool
) -> None:
    """Rejects the configurations that ltx-core builds but cannot run, or runs at a scale it was not asked for."""
    if dims not in (2, 3):
        raise ValueError(f"dims={dims!r}; LatentUpsampler uses 2-d (per-frame) or 3-d convolutions.")
    if not (spatial_upsample or temporal_upsample):
        raise ValueError("Either spatial_upsample or temporal_upsample must be True.")
    if mid_channels % 32:
        raise ValueError(f"mid_channels={mid_channels} must be a multiple of 32 (GroupNorm(32, mid_channels)).")
    if dims == 2 and (temporal_upsample or rational):
        raise ValueError(
            "dims=2 supports only the plain spatial x2 upsampler (ltx-core fails at run time otherwise); "
            "use dims=3 for temporal_upsample or rational_resampler."
        )
    if spatial_upsample and not temporal_upsample:
        if rational:
            rational_for_scale(spatial_scale)
        elif float(spatial_scale) != 2.0:
            raise ValueError(
                f"spatial_scale={spatial_scale!r} without rational_resampler: the pixel-shuffle upsampler always "
                "scales by 2. Set spatial_scale=2.0, or rational_resampler=True for other scales."
            )


class LatentUpsampler(nnx.Module):
    """Upsamples VAE latents spatially and/or temporally; same keyword arguments as ltx-core's.

    (B, in_channels, F, H, W) -> spatial: (B, in_channels, F, H*s, W*s); temporal: (B, in_channels,
    2F - 1, H, W) (the first upsampled frame is dropped, as the first latent frame encodes one
    pixel frame); both: (B, in_channels, 2F - 1, 2H, 2W).
    """

    def __init__(
        self,
        in_channels: int = 128,
        mid_channels: int = 512,
        num_blocks_per_stage: int = 4,
        dims: int = 3,
        spatial_upsample: bool = True,
        temporal_upsample: bool = False,
        spatial_scale: float = 2.0,
        rational_resampler: bool = False,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        _check_arguments(mid_channels, dims, spatial_upsample, temporal_upsample, spatial_scale, rational_resampler)
        self.in_channels, self.mid_channels, self.dims = in_channels, mid_channels, dims
        self.spatial_upsample, self.temporal_upsample = spatial_upsample, temporal_upsample
        self.spatial_scale, self.rational_resampler = float(spatial_scale), rational_resampler
        kw = {"padding": 1, "rngs": rngs, "param_dtype": param_dtype}

        self.initial_conv = Conv(in_channels, mid_channels, 3, ndim=dims, **kw)
        self.initial_norm = GroupNorm(32, mid_channels, param_dtype=param_dtype)
        self.res_blocks = nnx.List(
            [ResBlock(mid_channels, dims=dims, rngs=rngs, param_dtype=param_dtype) for _ in range(num_blocks_per_stage)]
        )
        if spatial_upsample and temporal_upsample:
            self.upsampler = nnx.List([Conv(mid_channels, 8 * mid_channels, 3, ndim=3, **kw), PixelShuffleND(3)])
        elif spatial_upsample and rational_resampler:
            self.upsampler = SpatialRationalResampler(
                mid_channels, self.spatial_scale, rngs=rngs, param_dtype=param_dtype
            )
        elif spatial_upsample:
            self.upsampler = nnx.List([Conv(mid_channels, 4 * mid_channels, 3, ndim=2, **kw), PixelShuffleND(2)])
        else:
            self.upsampler = nnx.List([Conv(mid_channels, 2 * mid_channels, 3, ndim=3, **kw), PixelShuffleND(1)])
        self.post_upsample_res_blocks = nnx.List(
            [ResBlock(mid_channels, dims=dims, rngs=rngs, param_dtype=param_dtype) for _ in range(num_blocks_per_stage)]
        )
        self.final_conv = Conv(mid_channels, in_channels, 3, ndim=dims, **kw)

    def __call__(self, latent: jax.Array) -> jax.Array:
        """latent (B, in_channels, F, H, W) -> the upsampled latent (see the class docstring)."""
        if latent.ndim != 5 or latent.shape[1] != self.in_channels:
            raise ValueError(
                f"latent has shape {tuple(latent.shape)}; LatentUpsampler expects (B, {self.in_channels}, F, H, W)."
            )
        b = latent.shape[0]
        x = frames_to_batch(latent) if self.dims == 2 else latent
        x = jax.nn.silu(self.initial_norm(self.initial_conv(x)))
        for block in self.res_blocks:
            x = block(x)
        x = self._upsample(x, b)
        for block in self.post_upsample_res_blocks:
            x = block(x)
        x = self.final_conv(x)
        return batch_to_frames(x, b) if self.dims == 2 else x

    def _upsample(self, x: jax.Array, b: int) -> jax.Array:
        if isinstance(self.upsampler, SpatialRationalResampler):
            return self.upsampler(x)
        conv, shuffle = self.upsampler
        if self.temporal_upsample:
            # The first upsampled frame is dropped: the first latent frame encodes one pixel frame.
            return shuffle(conv(x))[:, :, 1:]
        if self.dims == 2:
            return shuffle(conv(x))
        return batch_to_frames(shuffle(conv(frames_to_batch(x))), b)


def upsample_video(latent: jax.Array, upsampler: LatentUpsampler, mean: jax.Array, std: jax.Array) -> jax.Array:
    """Un-normalizes with the video VAE's per-channel statistics, upsamples, re-normalizes.

    ltx-core's `upsample_video(latent, video_encoder, upsampler)` reads the statistics from the
    encoder; here they are passed in: `mean` and `std` (C,) are the checkpoint's
    `vae.per_channel_statistics.mean-of-means` and `vae.per_channel_statistics.std-of-means`.
    latent (B, C, F, H, W) -> the upsampled latent, normalized again.
    """
    channels = latent.shape[1]
    for name, stat in (("mean", mean), ("std", std)):
        if tuple(stat.shape) != (channels,):
            raise ValueError(
                f"{name} has shape {tuple(stat.shape)}; it must be ({channels},), one value per latent channel "
                "(the VAE's per_channel_statistics)."
            )
    shape = (1, channels, 1, 1, 1)
    mean = jnp.asarray(mean).astype(latent.dtype).reshape(shape)
    std = jnp.asarray(std).astype(latent.dtype).reshape(shape)
    x = upsampler(latent * std + mean)
    return (x - mean) / std
