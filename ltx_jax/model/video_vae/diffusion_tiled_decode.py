"""Tiled decoding with LTX-2.5's diffusion decoder, tiles spread over devices.

Source: ltx-core 1.2.0 `DiffusionVideoDecoder._decode_pixels` / `_decode_temporal_group_isolated` /
`_decode_one_tile` in the default `DiffVAEMode.CHUNKED_EAGER` (deferred stage 4). For a latent:

1. The latent is padded to the size floors, its last frame repeated `trailing_frames` more times; stages 1-3 run
   once on the whole volume (`_features`, on the first device).
2. The standard-normal noise is drawn ONCE for the whole floored video (`decoder.video_shape`), from the caller's
   key, as upstream draws `torch.randn(target_shape)` from the pipeline's generator: the same key gives the same
   video whatever the devices. A tile's noise is its pixels of that draw, fitted to its stage-5 canvas (the end
   repeated). (Upstream's single-step x0 decoders draw per tile instead; here they slice the one draw too.)
3. Per tile (`diffusion_tiling.tile_schedule`): stage 4 on its window of the features, the trailing pad cropped
   in the trailing tiles, then stage 5's Euler steps on its noise (`_decode_diffusion_tile`). The tiles of one
   temporal group go round-robin to `devices`, each holding a copy of the parameters, all dispatched before any is
   blended; they come back to the first device, multiplied by their masks and summed (`tile_blending.masked_sum`).
4. Groups are joined as upstream streams them (`tile_blending.join_temporal_groups`): a group's overlap with the
   next is held back until both are summed. Each chunk is cropped to the latent's own video (the size floors'
   frames at the end and pixels at both sides), and a chunk wholly past it is not yielded.

Sums are float32 (upstream accumulates a bf16 decode in float16) and divided by the summed masks, which are
complementary here, so the division changes a value by float32 rounding only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.video_vae.diffusion_tiling import DiffusionTile, TileGeometry, stage4_cells, tile_schedule
from ltx_jax.model.video_vae.diffusion_video_decoder import SCALE, _resize_axis
from ltx_jax.model.video_vae.tile_blending import chunk_frames, join_temporal_groups, mask_3d, masked_sum
from ltx_jax.model.video_vae.tiling import TileSizeConfig

if TYPE_CHECKING:
    from ltx_jax.model.video_vae.diffusion_video_decoder import DiffusionVideoDecoder

Windows = tuple[tuple[tuple[int, int], ...], ...]


@dataclasses.dataclass(frozen=True)
class TiledLayout:
    """A latent's tiled decode, from shapes alone.

    Attributes:
        video: (B, 3, F, H, W) of the floored latent's video, the shape of the noise.
        content: (frames, height, width) of the latent's own video; `offset`: its (top, left) in the floored one.
        groups: the tiles (`diffusion_tiling.tile_schedule`) by the frames [start, stop) they write, in order.
    """

    video: tuple[int, ...]
    content: tuple[int, int, int]
    offset: tuple[int, int]
    groups: tuple[tuple[tuple[int, int], tuple[DiffusionTile, ...]], ...]

    @classmethod
    def of(cls, decoder: DiffusionVideoDecoder, latent_shape: tuple[int, ...], tiling: TileSizeConfig) -> TiledLayout:
        if len(latent_shape) != 5 or latent_shape[1] != decoder.config.in_channels:
            raise ValueError(
                f"latent must be (B, {decoder.config.in_channels}, T', H', W') latents, got shape {latent_shape}."
            )
        work = decoder.work_shape(tuple(latent_shape))
        _, _, t, h, w = latent_shape
        groups: dict[tuple[int, int], list[DiffusionTile]] = {}
        for tile in tile_schedule(tiling, decoder.config, stage4_cells(decoder.config, work[2:])):
            groups.setdefault(tile.out[0], []).append(tile)
        return cls(
            video=decoder.video_shape(tuple(latent_shape)),
            content=((t - 1) * SCALE[0] + 1, h * SCALE[1], w * SCALE[2]),
            offset=((work[3] - h) // 2 * SCALE[1], (work[4] - w) // 2 * SCALE[2]),
            groups=tuple((span, tuple(tiles)) for span, tiles in groups.items()),
        )

    def chunks(self) -> list[tuple[int, int]]:
        """(first frame, frames) of each chunk yielded: the joined groups' chunks, cut at the content's end."""
        spans = [span for span, _ in self.groups]
        starts = [span[0] for span in spans]
        kept = [(start, min(n, self.content[0] - start)) for start, n in zip(starts, chunk_frames(spans), strict=True)]
        return [(start, n) for start, n in kept if n > 0]


def tiled_chunk_frames(
    decoder: DiffusionVideoDecoder, latent_shape: tuple[int, ...], tiling: TileSizeConfig
) -> list[int]:
    """How many frames each chunk `tiled_decode` yields for a latent of `latent_shape` holds, in order."""
    return [frames for _, frames in TiledLayout.of(decoder, tuple(latent_shape), tiling).chunks()]


def _feature_windows(tiles: Sequence[DiffusionTile], feature_frames: int) -> Windows:
    """Each tile's (T, H, W) window of the stage-4 features; a trailing tile's runs through the trailing pad."""
    return tuple(
        ((tile.cells[0][0], feature_frames if tile.trailing else tile.cells[0][1]), tile.cells[1], tile.cells[2])
        for tile in tiles
    )


@functools.partial(jax.jit, static_argnums=0)
def _diffusion_features(graphdef: nnx.GraphDef, state: nnx.State, latent: jax.Array) -> jax.Array:
    """Stages 1-3 on the padded latent: (B, T, H, W, C) stage-4 input features."""
    decoder = nnx.merge(graphdef, state)
    x = decoder.stem(decoder.pad(latent.astype(decoder.param_dtype)))
    for i in range(3):
        x = decoder.det_stage(x, i)
    return x


@functools.partial(jax.jit, static_argnames=("features", "pixels"))
def _windows(feature: jax.Array, noise: jax.Array, *, features: Windows, pixels: Windows) -> list[jax.Array]:
    """Each tile's feature window (channels last) and noise window (channels first)."""
    cut = [feature[:, t0:t1, h0:h1, w0:w1] for (t0, t1), (h0, h1), (w0, w1) in features]
    return cut + [noise[:, :, t0:t1, h0:h1, w0:w1] for (t0, t1), (h0, h1), (w0, w1) in pixels]


@functools.partial(jax.jit, static_argnums=0, static_argnames=("first", "trailing", "cells"))
def _decode_diffusion_tile(
    graphdef: nnx.GraphDef, state: nnx.State, feature: jax.Array, noise: jax.Array, *, first: bool, trailing: bool,
    cells: int,
) -> jax.Array:  # fmt: skip
    """One tile: stage 4 on its feature window (`cells` stage-4 frames of its own, then any trailing pad), stage 5
    from its noise stretched to the stage-5 canvas, cropped back to the noise's frames: (B, 3, f, h, w)."""
    decoder = nnx.merge(graphdef, state)
    context = decoder.context(feature, first=first, trailing=trailing)
    frames = TileGeometry.of(decoder.config).stage5_frames(cells, first, trailing)
    x_t = _resize_axis(noise.astype(decoder.param_dtype), 2, frames, "repeat_last")
    return _resize_axis(decoder.denoise(context, x_t), 2, noise.shape[2], "repeat_last")


def _flags(tile: DiffusionTile) -> dict[str, bool | int]:
    """`_decode_diffusion_tile`'s static arguments for `tile`."""
    return {"first": tile.first, "trailing": tile.trailing, "cells": tile.cells[0][1] - tile.cells[0][0]}


@functools.partial(jax.jit, static_argnames=("frames", "box"))
def _cropped(video: jax.Array, *, frames: int, box: tuple[int, int, int, int]) -> jax.Array:
    """The first `frames` frames of a chunk, inside `box` (top, height, left, width)."""
    top, height, left, width = box
    return video[:, :, :frames, top : top + height, left : left + width]


class _Spread:
    """The decoder's parameters on each device that decodes tiles (the first also runs stages 1-3 and blends)."""

    def __init__(self, decoder: DiffusionVideoDecoder, devices: Sequence[jax.Device] | None) -> None:
        self.graphdef, state = nnx.split(decoder)
        self.devices = list(devices) if devices else [None]
        self.states = [state if d is None else jax.device_put(state, d) for d in self.devices]

    def put(self, value: jax.Array, slot: int) -> jax.Array:
        device = self.devices[slot]
        return value if device is None else jax.device_put(value, device)


def tiled_decode(
    decoder: DiffusionVideoDecoder,
    latent: jax.Array,
    tiling: TileSizeConfig,
    *,
    key: jax.Array | None = None,
    noise: jax.Array | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> Iterator[jax.Array]:
    """(B, C, T', H', W') normalized latent -> (B, 3, n, 32 H', 32 W') chunks of its video (along time, in the
    latent's dtype): the module docstring. The noise from `key`, or `noise` itself (`decoder.video_shape(...)`)."""
    layout = TiledLayout.of(decoder, tuple(latent.shape), tiling)
    if (key is None) == (noise is None):
        raise ValueError("pass exactly one of key=jax.random.key(seed) or noise= (standard normal, video_shape).")
    if noise is not None and tuple(noise.shape) != layout.video:
        raise ValueError(f"noise has shape {noise.shape}; this latent needs {layout.video} (`decoder.video_shape`).")
    spread = _Spread(decoder, devices)
    latent = spread.put(latent, 0)
    noise = jax.random.normal(key, layout.video, decoder.param_dtype) if noise is None else spread.put(noise, 0)
    feature = _diffusion_features(spread.graphdef, spread.states[0], latent)
    return _blended(spread, layout, feature, noise, latent.dtype)


def _blended(
    spread: _Spread, layout: TiledLayout, feature: jax.Array, noise: jax.Array, dtype: jnp.dtype
) -> Iterator[jax.Array]:
    """The groups decoded one after the other, joined, and cropped to the content: the chunks `tiled_decode` yields."""
    sums = (_group_sum(spread, layout, tiles, feature, noise) for _, tiles in layout.groups)
    joined = join_temporal_groups([span for span, _ in layout.groups], sums, dtype)
    chunks = dict(layout.chunks())
    box = (layout.offset[0], layout.content[1], layout.offset[1], layout.content[2])
    for (span, _), chunk in zip(layout.groups, joined, strict=True):
        if span[0] in chunks:
            yield _cropped(chunk, frames=chunks[span[0]], box=box)


def _group_sum(
    spread: _Spread, layout: TiledLayout, tiles: tuple[DiffusionTile, ...], feature: jax.Array, noise: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """One temporal group's tiles decoded round-robin on the devices, masked and summed on the first."""
    cut = _windows(
        feature, noise, features=_feature_windows(tiles, feature.shape[1]), pixels=tuple(t.out for t in tiles)
    )
    decoded = []
    for i, tile in enumerate(tiles):  # every tile dispatched before any is blended: the devices run at once
        slot = i % len(spread.devices)
        window, tile_noise = spread.put(cut[i], slot), spread.put(cut[len(tiles) + i], slot)
        decoded.append(_decode_diffusion_tile(spread.graphdef, spread.states[slot], window, tile_noise, **_flags(tile)))
    decoded = [spread.put(x, 0) for x in decoded]
    (f0, f1), size = tiles[0].out[0], layout.video[3:]
    out = tuple(tile.out for tile in tiles)
    return masked_sum(decoded, [mask_3d(t.masks) for t in tiles], batch=layout.video[0], size=(f1 - f0, *size), out=out)


def compile_tiles(
    decoder: DiffusionVideoDecoder, latent: jax.ShapeDtypeStruct, tiling: TileSizeConfig, devices: Sequence[jax.Device]
) -> int:
    """Compiles, without running, stages 1-3 and the tile programs `tiled_decode(..., devices=devices)` runs for a
    latent like `latent` (placed on the first device; the noise from a key). Returns how many tile programs."""
    layout = TiledLayout.of(decoder, tuple(latent.shape), tiling)
    graphdef, state = nnx.split(decoder)

    def placed(shape: tuple[int, ...], dtype: jnp.dtype, device: jax.Device) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=jax.sharding.SingleDeviceSharding(device))

    def states(device: jax.Device) -> nnx.State:
        return jax.tree.map(lambda x: placed(x.shape, x.dtype, device), state)

    feature = _diffusion_features.lower(graphdef, states(devices[0]), latent)
    feature.compile()
    feature_shape = feature.out_info.shape
    compiled = set()
    for _, tiles in layout.groups:
        windows = _feature_windows(tiles, feature_shape[1])
        for i, (tile, window) in enumerate(zip(tiles, windows, strict=True)):
            device = devices[i % len(devices)]
            shapes = (
                (feature_shape[0], *(b - a for a, b in window), feature_shape[4]),
                (*layout.video[:2], *(b - a for a, b in tile.out)),
            )
            flags = _flags(tile)
            if (shapes, tuple(flags.values()), device) in compiled:
                continue
            feature_window, noise_window = (placed(shape, decoder.param_dtype, device) for shape in shapes)
            _decode_diffusion_tile.lower(graphdef, states(device), feature_window, noise_window, **flags).compile()
            compiled.add((shapes, tuple(flags.values()), device))
    return len(compiled)
