"""Tiled video decoding's blending: each temporal group's tiles decoded, masked and summed, and the
groups' overlaps joined into finished chunks of frames.

Source: ltx-core's `VideoDecoder.tiled_decode` (`video_vae.py` in 1.0.0): tiles blended with their
trapezoidal masks, a group's overlap with the next one held back until both are summed. The slicing
and the sums run as jitted programs, one per group geometry. `masked_sum` and `join_temporal_groups` also blend
the diffusion decoder's tiles (diffusion_tiled_decode.py).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.model.video_vae.tiling import Tile
from ltx_jax.model.video_vae.video_vae import SpatioTemporalScaleFactors


class TileDecoding(Protocol):
    """Decodes tile `i` (on one of `devices`, round-robin; None: the default device)."""

    devices: list[jax.Device | None]
    video_downscale_factors: SpatioTemporalScaleFactors

    def __call__(
        self, i: int, latent: jax.Array, timestep: jax.Array | float | None, noise: jax.Array | None
    ) -> jax.Array: ...


def _accumulate_group(
    decoder: TileDecoding,
    latent: jax.Array,
    group: list[Tile],
    timestep: jax.Array | float | None,
    noise: jax.Array | None,
) -> tuple[jax.Array, jax.Array]:
    """Decodes one temporal group's tiles into a (B, C, T_group, H, W) float32 sum of masked tiles and its weights.

    The slicing and the blending run as jitted programs (one per group geometry), not op by op: op by
    op, each tile's slices, masks and scatters were small programs of their own, compiled on the main
    thread when a cold run decoded (about 4 s on an H200, benchmarks/results/2026-12-03/README.md, "Sixth round")."""
    t0 = group[0].out_coords[0]
    b, scale = latent.shape[0], decoder.video_downscale_factors
    size = (t0.stop - t0.start, latent.shape[3] * scale.height, latent.shape[4] * scale.width)
    windows = tuple(_bounds(tile.in_coords) for tile in group)
    latents = _windows(latent, windows)
    noises = [None] * len(group) if noise is None else _windows(noise, windows)
    # Every tile is dispatched before any is blended, so tiles on different devices run at once.
    decoded_tiles = [decoder(i, x, timestep, n) for i, (x, n) in enumerate(zip(latents, noises, strict=True))]
    home = decoder.devices[0]
    if home is not None:
        decoded_tiles = [jax.device_put(decoded, home) for decoded in decoded_tiles]
    masks = [mask_3d(tile.masks_1d) for tile in group]
    return masked_sum(decoded_tiles, masks, batch=b, size=size, out=tuple(_bounds(t.out_coords) for t in group))


def mask_3d(masks_1d: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """A tile's (T, H, W) blend mask: its 1-D masks multiplied on the host, then float32."""
    t, h, w = masks_1d
    return np.asarray(t[:, None, None] * h[None, :, None] * w[None, None, :], np.float32)


def _bounds(slices: tuple[slice, ...]) -> tuple[tuple[int, int], ...]:
    """Slices as (start, stop) pairs: hashable, for a jitted function's static arguments."""
    return tuple((cut.start, cut.stop) for cut in slices)


@functools.partial(jax.jit, static_argnames="windows")
def _windows(x: jax.Array, windows: tuple[tuple[tuple[int, int], ...], ...]) -> list[jax.Array]:
    """`x[:, :, f0:f1, h0:h1, w0:w1]` for each window's three (start, stop) pairs."""
    return [x[:, :, f0:f1, h0:h1, w0:w1] for (f0, f1), (h0, h1), (w0, w1) in windows]


@functools.partial(jax.jit, static_argnames=("batch", "size", "out"))
def masked_sum(
    decoded_tiles: list[jax.Array],
    masks: list[jax.Array],
    *,
    batch: int,
    size: tuple[int, int, int],
    out: tuple[tuple[tuple[int, int], ...], ...],
) -> tuple[jax.Array, jax.Array]:
    """The tiles, each times its mask, summed where `out` places them (frames from 0, the group's
    start), and the summed masks: `(batch, C, *size)` and `(batch, 1, *size)` float32."""
    values = jnp.zeros((batch, decoded_tiles[0].shape[1], *size), jnp.float32)
    weights = jnp.zeros((batch, 1, *size), jnp.float32)
    for decoded, mask, (_, (h0, h1), (w0, w1)) in zip(decoded_tiles, masks, out, strict=True):
        place = (slice(None), slice(None), slice(0, decoded.shape[2]), slice(h0, h1), slice(w0, w1))
        values = values.at[place].add(decoded.astype(jnp.float32) * mask)
        weights = weights.at[place].add(jnp.broadcast_to(mask, (1, 1, *mask.shape)))
    return values, weights


def temporal_groups(tiles: list[Tile]) -> dict[tuple[int, int], list[Tile]]:
    """The tiles by the output frames they cover, in order."""
    groups: dict[tuple[int, int], list[Tile]] = {}
    for tile in tiles:
        groups.setdefault((tile.out_coords[0].start, tile.out_coords[0].stop), []).append(tile)
    return groups


def chunk_frames(spans: list[tuple[int, int]]) -> list[int]:
    """The frames of each chunk the blending yields: a group's up to the next group's first frame, the last whole."""
    return [b[0] - a[0] for a, b in itertools.pairwise(spans)] + [spans[-1][1] - spans[-1][0]]


def blend_temporal_groups(
    decoder: TileDecoding,
    latent: jax.Array,
    tiles: list[Tile],
    timestep: jax.Array | float | None,
    noise: jax.Array | None,
) -> Iterator[jax.Array]:
    """ltx-core's temporal streaming of the conv decoder's tiles (`join_temporal_groups`)."""
    groups = temporal_groups(tiles)
    sums = (_accumulate_group(decoder, latent, group, timestep, noise) for group in groups.values())
    return join_temporal_groups(list(groups), sums, latent.dtype)


def join_temporal_groups(
    spans: list[tuple[int, int]], sums: Iterable[tuple[jax.Array, jax.Array]], dtype: jnp.dtype
) -> Iterator[jax.Array]:
    """One chunk of finished frames per group of `spans` (output frames [start, stop), in order), from each group's
    masked sums and summed masks: a group's overlap with the next one is held back until both are summed; a
    chunk holds its group's frames up to the next group's first (`chunk_frames`)."""
    frames = iter(chunk_frames(spans))
    previous, previous_weights, previous_span = None, None, None
    for span, (values, weights) in zip(spans, sums, strict=True):
        if previous is not None:
            overlap = max(0, previous_span[1] - span[0])
            if overlap:
                values, weights = _with_overlap(values, weights, previous, previous_weights, overlap=overlap)
            yield _normalized(previous, previous_weights, frames=next(frames), dtype=dtype)
        previous, previous_weights, previous_span = values, weights, span
    yield _normalized(previous, previous_weights, frames=next(frames), dtype=dtype)


@functools.partial(jax.jit, static_argnames="overlap")
def _with_overlap(
    values: jax.Array, weights: jax.Array, previous: jax.Array, previous_weights: jax.Array, *, overlap: int
) -> tuple[jax.Array, jax.Array]:
    """A group's sums with the previous group's last `overlap` frames (the frames both cover) added."""
    values = values.at[:, :, :overlap].add(previous[:, :, -overlap:])
    return values, weights.at[:, :, :overlap].add(previous_weights[:, :, -overlap:])


@functools.partial(jax.jit, static_argnames=("frames", "dtype"))
def _normalized(values: jax.Array, weights: jax.Array, *, frames: int, dtype: jnp.dtype) -> jax.Array:
    """The first `frames` frames of a group's sums, divided by their weights: finished pixels."""
    return (values[:, :, :frames] / jnp.maximum(weights[:, :, :frames], 1e-8)).astype(dtype)
