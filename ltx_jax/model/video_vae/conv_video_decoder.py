"""Convolutional video VAE decoder: (B, 128, 1 + k, H', W') latents -> (B, 3, 1 + 8k, 32 H', 32 W') pixels.

Source: upstream ltx-core `ltx_core/model/video_vae/conv_video_decoder.py` (`ConvVideoDecoder`);
ltx-core 1.0.0 has the same module as `video_vae.py::VideoDecoder`. Tiled decoding follows the
same file's `tiled_decode`: tiles are decoded one by one, blended with their masks
(`tile_blending.py`), and yielded as temporal chunks.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.timestep_embedding import PixArtAlphaCombinedTimestepSizeEmbeddings
from ltx_jax.model.video_vae.attention import AttnBlock3D
from ltx_jax.model.video_vae.convolution import CausalConv3d
from ltx_jax.model.video_vae.enums import NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.normalization import make_norm
from ltx_jax.model.video_vae.ops import PerChannelStatistics, unpatchify
from ltx_jax.model.video_vae.resnet import ResnetBlock3D, UNetMidBlock3D, check_no_noise_injection
from ltx_jax.model.video_vae.sampling import DepthToSpaceUpsample
from ltx_jax.model.video_vae.tile_blending import blend_temporal_groups, chunk_frames, temporal_groups
from ltx_jax.model.video_vae.tiling import TileSizeConfig
from ltx_jax.model.video_vae.video_vae import NORM_NUM_GROUPS, Blocks, SpatioTemporalScaleFactors, block_config

_UPSAMPLE_STRIDES = {"compress_time": (2, 1, 1), "compress_space": (1, 2, 2), "compress_all": (2, 2, 2)}


def decoder_bottleneck_channels(base_channels: int, decoder_blocks: Blocks) -> int:
    """`base_channels` times the channel multipliers of the upsampling blocks (upstream rule; 1.0.0
    hard-codes `8 * base_channels`, which agrees for every LTX-2 / 2.3 config)."""
    multiplier = 1
    for name, params in decoder_blocks:
        if name in _UPSAMPLE_STRIDES:
            multiplier *= block_config(params).get("multiplier", 1)
        elif name == "res_x_y":
            multiplier *= block_config(params).get("multiplier", 2)
    return base_channels * multiplier


def _make_decoder_block(
    name: str, config: dict[str, Any], channels: int, norm_layer: NormLayerType, tc: bool, common: dict[str, Any]
) -> tuple[nnx.Module, int]:
    """One `decoder_blocks` entry -> (module, output channels), as ltx-core's `_make_decoder_block`."""
    if name == "res_x":
        check_no_noise_injection(config.get("inject_noise", False))
        block = UNetMidBlock3D(
            channels,
            num_layers=config["num_layers"],
            resnet_groups=NORM_NUM_GROUPS,
            norm_layer=norm_layer,
            timestep_conditioning=tc,
            **common,
        )
        return block, channels
    if name == "res_x_y":
        check_no_noise_injection(config.get("inject_noise", False))
        out = channels // config.get("multiplier", 2)
        return ResnetBlock3D(channels, out, groups=NORM_NUM_GROUPS, norm_layer=norm_layer, **common), out
    if name in _UPSAMPLE_STRIDES:
        reduction = config.get("multiplier", 1)
        residual = config.get("residual", False) if name == "compress_all" else False
        block = DepthToSpaceUpsample(
            channels, _UPSAMPLE_STRIDES[name], residual=residual, out_channels_reduction_factor=reduction, **common
        )
        return block, channels // reduction
    if name == "attn":
        return AttnBlock3D(channels, rngs=common["rngs"], param_dtype=common["param_dtype"]), channels
    raise ValueError(
        f"decoder block {name!r} is not supported; valid: res_x, res_x_y, compress_time, compress_space, "
        "compress_all, attn ('attn_res_x' fails in ltx-core too)."
    )


class VideoDecoder(nnx.Module):
    """ltx-core's conv decoder (`ConvVideoDecoder` upstream, `VideoDecoder` in 1.0.0), same parameter paths.

    `conv_in`, `up_blocks` (the config's `decoder_blocks` reversed), norm (+ timestep AdaLN), SiLU,
    `conv_out`, unpatchify. With `timestep_conditioning` the latent is first mixed with Gaussian
    noise (`decode_noise_scale`) and every `res_x` block and the output norm are modulated by the
    timestep (default `decode_timestep`) times `timestep_scale_multiplier`.
    """

    def __init__(
        self,
        *,
        in_channels: int = 128,
        out_channels: int = 3,
        decoder_blocks: Blocks = (),
        patch_size: int = 4,
        norm_layer: NormLayerType = NormLayerType.PIXEL_NORM,
        causal: bool = False,
        timestep_conditioning: bool = False,
        decoder_spatial_padding_mode: PaddingModeType = PaddingModeType.REFLECT,
        base_channels: int = 128,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        blocks = list(decoder_blocks)
        self.video_downscale_factors = SpatioTemporalScaleFactors.from_blocks(blocks, patch_size)
        self.patch_size, self.causal, self.timestep_conditioning = patch_size, causal, timestep_conditioning
        self.latent_channels, self.param_dtype = in_channels, param_dtype
        self.decode_noise_scale, self.decode_timestep = 0.025, 0.05  # ltx-core's constants
        self.per_channel_statistics = PerChannelStatistics(in_channels, param_dtype=param_dtype)
        common = {"spatial_padding_mode": decoder_spatial_padding_mode, "rngs": rngs, "param_dtype": param_dtype}
        channels = decoder_bottleneck_channels(base_channels, blocks)
        self.conv_in = CausalConv3d(in_channels, channels, 3, **common)
        up_blocks = []
        for name, params in reversed(blocks):
            block, channels = _make_decoder_block(
                name, block_config(params), channels, norm_layer, timestep_conditioning, common
            )
            up_blocks.append(block)
        self.up_blocks = nnx.List(up_blocks)
        self.conv_norm_out = make_norm(norm_layer, channels, groups=NORM_NUM_GROUPS, eps=1e-6, param_dtype=param_dtype)
        self.conv_out = CausalConv3d(channels, out_channels * patch_size**2, 3, **common)
        if timestep_conditioning:
            self.timestep_scale_multiplier = nnx.Param(jnp.asarray(1000.0, param_dtype))
            self.last_time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(
                channels * 2, rngs=rngs, param_dtype=param_dtype
            )
            self.last_scale_shift_table = nnx.Param(jnp.zeros((2, channels), param_dtype))

    def _check_noise_args(self, key: jax.Array | None, noise: jax.Array | None) -> None:
        if self.timestep_conditioning and (key is None) == (noise is None):
            raise ValueError(
                "This decoder is timestep-conditioned and mixes Gaussian noise into the latent: pass exactly one "
                "of key=jax.random.key(seed) or noise= (a standard-normal array shaped like the latent)."
            )

    def _noised(self, x: jax.Array, key: jax.Array | None, noise: jax.Array | None) -> jax.Array:
        self._check_noise_args(key, noise)
        if noise is None:
            noise = jax.random.normal(key, x.shape, x.dtype)
        elif noise.shape != x.shape:
            raise ValueError(f"noise has shape {noise.shape}; it must match the latent's {x.shape}.")
        return noise.astype(x.dtype) * self.decode_noise_scale + (1.0 - self.decode_noise_scale) * x

    def __call__(
        self,
        sample: jax.Array,
        timestep: jax.Array | float | None = None,
        *,
        key: jax.Array | None = None,
        noise: jax.Array | None = None,
    ) -> jax.Array:
        """(B, C_latent, F', H', W') normalized latent -> (B, 3, 1 + t (F' - 1), s H', s W') video in ~[-1, 1].

        Args:
            sample: the latent, as the DiT produces it (normalized by the per-channel statistics).
            timestep: (B,) or scalar decode timestep; `decode_timestep` (0.05) when None.
                Only used with timestep conditioning.
            key: PRNG key for the decode noise (timestep-conditioned decoders need `key` or `noise`).
            noise: the standard-normal decode noise itself, shaped like `sample`, instead of `key`.
        Returns:
            The decoded video in `sample`'s dtype.
        """
        if sample.ndim != 5 or sample.shape[1] != self.latent_channels:
            raise ValueError(
                f"sample must be (B, {self.latent_channels}, F', H', W') latents, got shape {sample.shape}."
            )
        batch, out_dtype = sample.shape[0], sample.dtype
        x = sample.astype(self.param_dtype)
        scaled_timestep = None
        if self.timestep_conditioning:
            x = self._noised(x, key, noise)
            timestep = self.decode_timestep if timestep is None else timestep
            timestep = jnp.broadcast_to(jnp.asarray(timestep, x.dtype).reshape(-1), (batch,))
            scaled_timestep = timestep * self.timestep_scale_multiplier[...].astype(x.dtype)
        x = self.conv_in(self.per_channel_statistics.un_normalize(x), causal=self.causal)
        for block in self.up_blocks:
            if isinstance(block, UNetMidBlock3D):
                x = block(x, causal=self.causal, timestep=scaled_timestep)
            else:
                x = block(x, causal=self.causal)
        x = self.conv_norm_out(x)
        if self.timestep_conditioning:
            embedded = self.last_time_embedder(scaled_timestep, hidden_dtype=x.dtype).reshape(batch, 2, -1)
            ada = self.last_scale_shift_table[...].astype(x.dtype)[None] + embedded
            x = x * (1 + ada[:, 1, :, None, None, None]) + ada[:, 0, :, None, None, None]
        x = self.conv_out(jax.nn.silu(x), causal=self.causal)
        return unpatchify(x, self.patch_size, 1).astype(out_dtype)

    def tiled_decode(
        self,
        latent: jax.Array,
        tiling_config: TileSizeConfig,
        timestep: jax.Array | float | None = None,
        *,
        key: jax.Array | None = None,
        noise: jax.Array | None = None,
        devices: Sequence[jax.Device] | None = None,
    ) -> Iterator[jax.Array]:
        """Decodes `latent` tile by tile; yields (B, 3, T_i, H, W) temporal chunks whose concatenation
        along time is the video (same shape as `self(latent)`).

        The decode noise is drawn once for the whole latent (from `key`, or given as `noise`) and
        sliced per tile, so overlapping tiles see the same noise. With `devices` (e.g. a mesh's
        devices), the tiles of a temporal group are decoded round-robin on them, concurrently (JAX
        dispatches asynchronously), and blended on the first device.
        """
        if not isinstance(tiling_config, TileSizeConfig):
            raise TypeError(f"tiling_config must be a TileSizeConfig, got {type(tiling_config).__name__}.")
        self._check_noise_args(key, noise)
        if self.timestep_conditioning and noise is None:
            noise = jax.random.normal(key, latent.shape, self.param_dtype)
        tiles = tiling_config.tiles(tuple(latent.shape[2:]), self.video_downscale_factors)
        return blend_temporal_groups(_TileDecoder(self, devices), latent, tiles, timestep, noise)

    def tiled_chunk_frames(self, latent_shape: tuple[int, ...], tiling_config: TileSizeConfig) -> list[int]:
        """How many frames each chunk `tiled_decode` yields for a latent of `latent_shape` holds, in order."""
        return chunk_frames(
            list(temporal_groups(tiling_config.tiles(tuple(latent_shape[2:]), self.video_downscale_factors)))
        )

    def compile_tiles(
        self, latent: jax.ShapeDtypeStruct, tiling_config: TileSizeConfig, devices: Sequence[jax.Device]
    ) -> int:
        """Compiles, without running, the tile programs `tiled_decode(..., devices=devices)` runs for a
        latent like `latent` (no timestep; the noise from a key), so that decoding finds them compiled.
        Returns how many distinct programs that was."""
        graphdef, state = nnx.split(self)
        tiles = tiling_config.tiles(tuple(latent.shape[2:]), self.video_downscale_factors)
        compiled = set()
        for group in temporal_groups(tiles).values():
            for i, tile in enumerate(group):
                device = devices[i % len(devices)]
                sizes = (len(range(n)[cut]) for n, cut in zip(latent.shape[2:], tile.in_coords, strict=True))
                shape = (*latent.shape[:2], *sizes)
                if (shape, device) not in compiled:
                    arguments = _placed_tile_arguments(state, shape, latent.dtype, self, device)
                    _decode_tile.lower(graphdef, *arguments).compile()
                    compiled.add((shape, device))
        return len(compiled)


@functools.partial(jax.jit, static_argnums=0)
def _decode_tile(
    graphdef: nnx.GraphDef, state: nnx.State, latent: jax.Array, timestep: jax.Array | None, noise: jax.Array | None
) -> jax.Array:
    """One tile through the decoder. Module-level, keyed by the (hashable) graph definition, so
    repeated `tiled_decode` calls on equal decoders reuse the compiled tile shapes."""
    return nnx.merge(graphdef, state)(latent, timestep, noise=noise)


def _placed_tile_arguments(
    state: nnx.State, shape: tuple[int, ...], dtype: jnp.dtype, decoder: VideoDecoder, device: jax.Device
) -> tuple:
    """`_decode_tile`'s arguments after `_TileDecoder` has put them on `device`, as shapes: the
    parameters, the latent tile, no timestep, and the noise tile where the decoder takes noise."""
    placed = jax.sharding.SingleDeviceSharding(device)
    states = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=placed), state)
    noise = jax.ShapeDtypeStruct(shape, decoder.param_dtype, sharding=placed) if decoder.timestep_conditioning else None
    return states, jax.ShapeDtypeStruct(shape, dtype, sharding=placed), None, noise


class _TileDecoder:
    """The decoder jitted over its parameters, with a copy of them on each device that decodes tiles."""

    def __init__(self, decoder: VideoDecoder, devices: Sequence[jax.Device] | None) -> None:
        graphdef, state = nnx.split(decoder)
        self.devices = list(devices) if devices else [None]
        self.states = [state if d is None else jax.device_put(state, d) for d in self.devices]
        self.decode = functools.partial(_decode_tile, graphdef)
        self.video_downscale_factors = decoder.video_downscale_factors

    def __call__(
        self, i: int, latent: jax.Array, timestep: jax.Array | float | None, noise: jax.Array | None
    ) -> jax.Array:
        """Decodes one tile on device `i % len(devices)`; the result stays there until it is blended."""
        slot = i % len(self.devices)
        device = self.devices[slot]
        if device is not None:
            latent, timestep, noise = jax.device_put((latent, timestep, noise), device)
        return self.decode(self.states[slot], latent, timestep, noise)


def decode_video(
    decoder: VideoDecoder,
    latent: jax.Array,
    tiling_config: TileSizeConfig | None = None,
    *,
    timestep: jax.Array | float | None = None,
    key: jax.Array | None = None,
    noise: jax.Array | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> jax.Array:
    """The whole (B, 3, F, H, W) video in ~[-1, 1]: one pass, or tile by tile with `tiling_config`
    (the tiles spread over `devices` when given)."""
    if tiling_config is None:
        return decoder(latent, timestep, key=key, noise=noise)
    chunks = decoder.tiled_decode(latent, tiling_config, timestep, key=key, noise=noise, devices=devices)
    return jnp.concatenate(list(chunks), axis=2)
