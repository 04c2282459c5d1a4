"""Tile geometry and blend masks for tiled VAE decoding.

Source: upstream ltx-core `ltx_core/tiling.py` (`TileSizeConfig`, `split_by_size`,
`split_temporal_causal`, the masks) and `video_vae.py::map_spatial_slice` / `map_temporal_slice`;
ltx-core 1.0.0 keeps the same splits in `model/video_vae/tiling.py` + `video_vae.py` under other
names. Geometry is plain Python on static shapes; masks are float32 numpy arrays.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ltx_jax.model.video_vae.video_vae import SpatioTemporalScaleFactors


def compute_trapezoidal_mask_1d(length: int, ramp_left: int, ramp_right: int, left_starts_from_0: bool) -> np.ndarray:
    """(length,) float32 mask: 1 inside, linear fade-in over `ramp_left`, fade-out over `ramp_right`.

    The fade-in starts at 0 when `left_starts_from_0` (temporal tiles) and above 0 otherwise; a
    fade-out and the matching neighbour's fade-in sum to 1.
    """
    if length <= 0:
        raise ValueError(f"mask length must be positive, got {length}.")
    ramp_left, ramp_right = max(0, min(ramp_left, length)), max(0, min(ramp_right, length))
    mask = np.ones(length, np.float32)
    if ramp_left:
        fade_in = np.linspace(0.0, 1.0, ramp_left + 1 if left_starts_from_0 else ramp_left + 2, dtype=np.float32)[:-1]
        mask[:ramp_left] *= fade_in if left_starts_from_0 else fade_in[1:]
    if ramp_right:
        mask[-ramp_right:] *= np.linspace(1.0, 0.0, ramp_right + 2, dtype=np.float32)[1:-1]
    return np.clip(mask, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class DimensionInterval:
    """One tile along one latent axis: [start, end) with blend ramps (in latent cells) at each side."""

    start: int
    end: int
    left_ramp: int
    right_ramp: int


SplitOperation = Callable[[int], list[DimensionInterval]]


def untiled(length: int) -> list[DimensionInterval]:
    return [DimensionInterval(0, length, 0, 0)]


def split_by_size(size: int, overlap: int) -> SplitOperation:
    """Tiles of `size` cells, consecutive ones sharing `overlap`; the last one ends at the axis end."""
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(f"tiles need 0 <= overlap < size, got size={size}, overlap={overlap}.")

    def split(length: int) -> list[DimensionInterval]:
        if length <= size:
            return untiled(length)
        amount = (length + size - 2 * overlap - 1) // (size - overlap)
        starts = [i * (size - overlap) for i in range(amount)]
        ends = [*(s + size for s in starts[:-1]), length]
        return [
            DimensionInterval(s, e, overlap if i else 0, overlap if i < amount - 1 else 0)
            for i, (s, e) in enumerate(zip(starts, ends, strict=True))
        ]

    return split


def split_temporal_causal(size: int, overlap: int) -> SplitOperation:
    """`split_by_size`, with every tile after the first starting one latent frame earlier (its ramp one
    longer): a tile's first latent frame decodes to a single "causal first" pixel frame, which the
    ramp weights 0, so the real frames still get their preceding context."""
    plain = split_by_size(size, overlap)

    def split(length: int) -> list[DimensionInterval]:
        tiles = plain(length)
        return tiles[:1] + [dataclasses.replace(t, start=t.start - 1, left_ramp=t.left_ramp + 1) for t in tiles[1:]]

    return split


def map_spatial_slice(interval: DimensionInterval, scale: int) -> tuple[slice, np.ndarray]:
    """Latent [start, end) -> pixel slice and its blend mask."""
    start, stop = interval.start * scale, interval.end * scale
    return slice(start, stop), compute_trapezoidal_mask_1d(
        stop - start, interval.left_ramp * scale, interval.right_ramp * scale, False
    )


def map_temporal_slice(interval: DimensionInterval, scale: int) -> tuple[slice, np.ndarray]:
    """Latent frames [start, end) -> pixel frames [start * t, 1 + (end - 1) * t) and its blend mask."""
    start, stop = interval.start * scale, 1 + (interval.end - 1) * scale
    left = 0 if interval.left_ramp == 0 else 1 + (interval.left_ramp - 1) * scale
    return slice(start, stop), compute_trapezoidal_mask_1d(stop - start, left, interval.right_ramp * scale, True)


class Tile(NamedTuple):
    """A tile over the (F, H, W) axes: latent slices in, pixel slices out, per-axis pixel masks."""

    in_coords: tuple[slice, slice, slice]
    out_coords: tuple[slice, slice, slice]
    masks_1d: tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class DimensionSizeConfig:
    """Tile size and overlap along one video axis, in frames or pixels; `tile_size=0` leaves it untiled."""

    tile_size: int = 0
    overlap: int = 0

    def __post_init__(self) -> None:
        if self.tile_size < 0 or self.overlap < 0:
            raise ValueError(f"tile_size and overlap must be >= 0, got {self}.")
        if self.tile_size == 0 and self.overlap:
            raise ValueError(f"an untiled axis (tile_size=0) must have overlap=0, got {self}.")
        if self.tile_size and self.overlap >= self.tile_size:
            raise ValueError(f"overlap must be less than tile_size, got {self}.")

    def is_tiled(self) -> bool:
        return self.tile_size > 0

    def check(self, factor: int, axis: str) -> None:
        """A tiled axis needs tile_size >= 2 latent cells and both values on the latent grid."""
        if self.is_tiled() and (self.tile_size < 2 * factor or self.tile_size % factor or self.overlap % factor):
            raise ValueError(
                f"{axis} tiling {self} must use multiples of {factor} (the VAE's {axis} scale) with "
                f"tile_size >= {2 * factor}."
            )


@dataclasses.dataclass(frozen=True)
class TileSizeConfig:
    """Size-based tiling of a (frames, height, width) video, as upstream ltx-core's `TileSizeConfig`."""

    frames: DimensionSizeConfig = DimensionSizeConfig()
    height: DimensionSizeConfig = DimensionSizeConfig()
    width: DimensionSizeConfig = DimensionSizeConfig()

    @classmethod
    def default(cls) -> TileSizeConfig:
        """Upstream's default: 80-frame tiles overlapping by 24, 768-px tiles overlapping by 64."""
        return cls(DimensionSizeConfig(80, 24), DimensionSizeConfig(768, 64), DimensionSizeConfig(768, 64))

    @classmethod
    def parse(cls, text: str) -> TileSizeConfig:
        """`FRAMES/OVERLAP,HEIGHT/OVERLAP,WIDTH/OVERLAP` (frames and pixels; 0/0 leaves an axis whole), or `none`
        (no tiling). Raises ValueError saying the form; the decoder checks the sizes against its grid."""
        form = "FRAMES/OVERLAP,HEIGHT/OVERLAP,WIDTH/OVERLAP (e.g. 48/16,512/128,512/128; 0/0 keeps an axis whole)"
        if text.strip().lower() == "none":
            return cls()
        axes = [axis.split("/") for axis in text.split(",")]
        if len(axes) != 3 or any(len(axis) != 2 or not all(v.strip().isdigit() for v in axis) for axis in axes):
            raise ValueError(f"{text!r} is not a tiling: give {form} or none")
        try:
            return cls(*(DimensionSizeConfig(int(size), int(overlap)) for size, overlap in axes))
        except ValueError as error:
            raise ValueError(f"{text!r}: {error}") from None

    @classmethod
    def from_long_side(
        cls,
        *,
        long_side: DimensionSizeConfig,
        height: int,
        width: int,
        scale_factors: SpatioTemporalScaleFactors,
        frames: DimensionSizeConfig | None = None,
    ) -> TileSizeConfig:
        """Spatial tile sizes scaled to the aspect ratio from one long-side size: ltx-core 1.0.0's
        `SpatialTilingConfig(tile_size_in_pixels, tile_overlap_in_pixels)` geometry, for `height` x `width` px."""
        if not long_side.is_tiled():
            raise ValueError(f"long_side must be tiled (tile_size > 0), got {long_side}.")

        def axis_size(axis_px: int, factor: int) -> int:
            size, overlap = long_side.tile_size // factor, long_side.overlap // factor
            tile = max(2, overlap + 1, round(size * (axis_px // factor) / (max(height, width) // factor)))
            return max(tile * factor, 2 * factor, long_side.overlap + factor)

        return cls(
            frames=frames or DimensionSizeConfig(),
            height=DimensionSizeConfig(axis_size(height, scale_factors.height), long_side.overlap),
            width=DimensionSizeConfig(axis_size(width, scale_factors.width), long_side.overlap),
        )

    def tiles(self, latent_shape: tuple[int, int, int], scale: SpatioTemporalScaleFactors) -> list[Tile]:
        """The tiles of a (F', H', W') latent, time slowest (tiles of one temporal slice are adjacent)."""
        axes = []
        for cfg, n, factor, name in zip(
            (self.frames, self.height, self.width), latent_shape, scale, ("frames", "height", "width"), strict=True
        ):
            cfg.check(factor, name)
            temporal = name == "frames"
            split = untiled
            if cfg.is_tiled():
                size, overlap = max(2, cfg.overlap // factor + 1, cfg.tile_size // factor), cfg.overlap // factor
                split = (split_temporal_causal if temporal else split_by_size)(size, overlap)
            mapping = map_temporal_slice if temporal else map_spatial_slice
            axes.append([(slice(iv.start, iv.end), *mapping(iv, factor)) for iv in split(n)])
        return [Tile(*zip(*combo, strict=True)) for combo in itertools.product(*axes)]
