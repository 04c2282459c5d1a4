"""Exact 3-D neighbourhood attention (NATTEN's `na3d`, non-causal, dilation 1) in JAX.

Source: ltx-core 1.2.0 `model/video_vae/transformer/fallback_na/eager.py` (`na3d`, the tiled-SDPA fallback that
runs on a host without natten or Triton, e.g. any CPU), which reproduces `natten.na3d`. A query at index i of an
axis of length L attends to the keys at [s, s + k) with s = clamp(i - k // 2, 0, L - k): the window is centred
and shifted inward at the borders, never clipped, so every query sees exactly k_t * k_h * k_w keys. A kernel
longer than its axis is cut to the axis, as the fallback does (natten itself refuses one).

The volume is never attended densely: queries are cut into tiles, each tile attends to the one key block that
holds all its windows (tile + kernel - 1 keys per axis), masked by the window rule computed from coordinates,
and `lax.map` walks the tiles (`tiles_per_step` of them at a time).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp

DEFAULT_QUERY_TILE = (4, 8, 8)  # (T, H, W) queries per tile
DEFAULT_TILES_PER_STEP = 16


def _window_start(index: jax.Array, length: int, kernel: int) -> jax.Array:
    """First key of the window of query `index` along an axis: clamp(i - k // 2, 0, L - k)."""
    return jnp.clip(index - kernel // 2, 0, length - kernel)


@dataclasses.dataclass(frozen=True)
class _Tiling:
    """Per axis (T, H, W): the volume, the kernel (cut to it), queries per tile, tiles, keys per tile's block."""

    dims: tuple[int, ...]
    kernels: tuple[int, ...]
    tiles: tuple[int, ...]
    counts: tuple[int, ...]
    blocks: tuple[int, ...]

    @classmethod
    def of(cls, dims: Sequence[int], kernel_size: Sequence[int], query_tile: Sequence[int]) -> _Tiling:
        kernels = tuple(min(kk, n) for kk, n in zip(kernel_size, dims, strict=True))
        tiles = tuple(max(1, min(t, n)) for t, n in zip(query_tile, dims, strict=True))
        counts = tuple(-(-n // t) for n, t in zip(dims, tiles, strict=True))
        blocks = tuple(min(n, t + kk - 1) for n, t, kk in zip(dims, tiles, kernels, strict=True))
        return cls(tuple(dims), kernels, tiles, counts, blocks)

    def starts(self, index: jax.Array) -> tuple[list[jax.Array], list[jax.Array]]:
        """Tile `index` (flat) -> its first query and its key block's first key, per axis. The block holds every
        window of the tile: it starts at the first query's window, shifted in so that it fits the volume."""
        q_starts = [i * t for i, t in zip(jnp.unravel_index(index, self.counts), self.tiles, strict=True)]
        axes = zip(q_starts, self.dims, self.kernels, self.blocks, strict=True)
        return q_starts, [jnp.minimum(_window_start(s, n, kk), n - b) for s, n, kk, b in axes]

    def visible(self, q_starts: list[jax.Array], k_starts: list[jax.Array]) -> jax.Array:
        """(tile queries, block keys) bool: the window rule on each axis, from coordinates."""
        masks = []
        for q0, k0, tile, block, n, kk in zip(
            q_starts, k_starts, self.tiles, self.blocks, self.dims, self.kernels, strict=True
        ):
            starts = _window_start(q0 + jnp.arange(tile), n, kk)[:, None]
            keys = (k0 + jnp.arange(block))[None, :]
            masks.append((keys >= starts) & (keys < starts + kk))
        visible = masks[0][:, None, None, :, None, None] & masks[1][None, :, None, None, :, None]
        visible = visible & masks[2][None, None, :, None, None, :]
        return visible.reshape(math.prod(self.tiles), math.prod(self.blocks))


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, visible: jax.Array) -> jax.Array:
    """(B, Q, N, D) queries, (B, K, N, D) keys and values, (Q, K) mask -> (B, Q, N, D); float32 softmax."""
    logits = jnp.einsum("bqnd,bknd->bnqk", q, k, preferred_element_type=jnp.float32)
    probs = jax.nn.softmax(jnp.where(visible, logits, -jnp.inf), axis=-1)
    out = jnp.einsum("bnqk,bknd->bqnd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.astype(v.dtype)


def neighborhood_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    kernel_size: Sequence[int],
    *,
    query_tile: Sequence[int] = DEFAULT_QUERY_TILE,
    tiles_per_step: int = DEFAULT_TILES_PER_STEP,
) -> jax.Array:
    """Softmax(q k^T) v over each query's (k_t, k_h, k_w) neighbourhood; no scaling (scale q first).

    Args:
        q, k, v: (B, T, H, W, N, D) queries, keys, values (N heads of width D).
        kernel_size: (k_t, k_h, k_w), odd.
        query_tile: (T, H, W) queries per tile (cut to the volume); the result does not depend on it.
        tiles_per_step: tiles attended at once (`lax.map`'s batch size).
    Returns:
        (B, T, H, W, N, D) in v's dtype; logits and softmax in float32.
    """
    if q.ndim != 6 or q.shape != k.shape or k.shape != v.shape:
        raise ValueError(f"q, k, v must be equal (B, T, H, W, N, D) arrays, got {q.shape}, {k.shape}, {v.shape}.")
    if len(kernel_size) != 3 or any(kk < 1 or kk % 2 == 0 for kk in kernel_size):
        raise ValueError(f"kernel_size must be three odd sizes (k_t, k_h, k_w), got {tuple(kernel_size)}.")
    batch, *dims, heads, width = q.shape
    tiling = _Tiling.of(dims, kernel_size, query_tile)
    padded = [c * t for c, t in zip(tiling.counts, tiling.tiles, strict=True)]
    q_padded = jnp.pad(q, [(0, 0), *((0, p - n) for p, n in zip(padded, dims, strict=True)), (0, 0), (0, 0)])

    def one_tile(index: jax.Array) -> jax.Array:
        q_starts, k_starts = tiling.starts(index)
        q_tile = jax.lax.dynamic_slice(q_padded, (0, *q_starts, 0, 0), (batch, *tiling.tiles, heads, width))
        k_block, v_block = (
            jax.lax.dynamic_slice(a, (0, *k_starts, 0, 0), (batch, *tiling.blocks, heads, width)) for a in (k, v)
        )
        flat = [a.reshape(batch, -1, heads, width) for a in (q_tile, k_block, v_block)]
        return _attend(*flat, tiling.visible(q_starts, k_starts)).reshape(q_tile.shape)

    count = math.prod(tiling.counts)
    tiled = jax.lax.map(one_tile, jnp.arange(count), batch_size=min(tiles_per_step, count))
    # (nT * nH * nW, B, tT, tH, tW, N, D) -> (B, nT tT, nH tH, nW tW, N, D), then the padding cut off.
    tiled = tiled.reshape(*tiling.counts, batch, *tiling.tiles, heads, width).transpose(3, 0, 4, 1, 5, 2, 6, 7, 8)
    return tiled.reshape(batch, *padded, heads, width)[:, : dims[0], : dims[1], : dims[2]]
