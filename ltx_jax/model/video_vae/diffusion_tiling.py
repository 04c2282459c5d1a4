"""LTX-2.5's diffusion decoder in tiles: where stages 4-5 cut the stage-4 features, the pixels each tile writes and
its blend masks, and the tile sizes ltx-pipelines picks from free memory.

Source: ltx-core 1.2.0 `model/video_vae/diffusion_tiling.py` (`prepare_tile_schedule`, `compute_tile_halos`,
`compute_tile_min_size`, `recommended_pixel_overlaps`, `slice_stage4_tile`, `stage5_pixel_shape_from_stage4`,
`recommended_decode_tiling_config`) and `tiling.py` (`TileSizeConfig.to_splitters(causal_temporal=False)`,
`split_by_size(..., min_tile_size)`, `_validate_overlap`).

The sizes are a `TileSizeConfig` in frames and pixels, as upstream's. Its cells are stage-4 input cells: one is
(s_t, s_h p, s_w p) pixels (upsample 4's stride times the patch; (2, 8, 8) with the defaults). Each axis is split
as `split_by_size` splits it, a short last tile grown to the tiles' floor (`min_cells`: stages 4 and 5 each see at
least their kernel); the time intervals map to pixels as the upsampler maps frames (a tile after the first keeps
the frame a x2 would drop), and each tile's blend mask is a trapezoid with symmetric ramps over its overlaps
(complementary: the masks of an axis sum to one). Overlaps must cover the stage-4 and stage-5 halos (`overlaps`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ltx_jax.model.video_vae.diffusion_video_decoder import SCALE, DiffusionDecoderConfig
from ltx_jax.model.video_vae.tiling import (
    DimensionInterval,
    DimensionSizeConfig,
    TileSizeConfig,
    compute_trapezoidal_mask_1d,
    split_by_size,
)

Bounds = tuple[int, int]  # [start, stop)
AXES = ("frames", "height", "width")
_COEF_CHUNKED_EAGER = 5  # upstream's stage-5 working-set multiplicity for `DiffVAEMode.CHUNKED_EAGER`
_SAFETY_BYTES, _MIN_MODEL_BYTES = 1 << 30, 1 << 30  # withheld (eager), and the least a decoder is assumed to take
_ELEMENT_BYTES, _STEP = 2, (8, 32, 32)  # upstream budgets bf16 activations; sizes on the lcm with the VAE's grid


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclasses.dataclass(frozen=True)
class TileGeometry:
    """What tiling needs of a decoder config (upstream's `diffvae_tiling_geometry_from_vae_config`).

    Attributes:
        pixel_scale: pixels (frames) per stage-4 cell along (T, H, W).
        min_cells: the least stage-4 cells a tile spans per axis, so that stages 4 and 5 see their kernels.
        overlaps: the least (frames, pixels) consecutive tiles must share: the stage-4 and stage-5 halos (depth
            times half the kernel), the larger, in pixels rounded up to the VAE's 8 frames / 32 pixels.
        stride_t, stage5_kernel_t: upsample 4's time stride and stage 5's time kernel (`stage5_frames`).
    """

    pixel_scale: tuple[int, int, int]
    min_cells: tuple[int, int, int]
    overlaps: tuple[int, int]
    stride_t: int
    stage5_kernel_t: int

    @classmethod
    def of(cls, c: DiffusionDecoderConfig) -> TileGeometry:
        stride, k4, k5 = c.upsamples[3][0], c.stage_kernels[3], c.stage5_kernel
        scale = (stride[0], stride[1] * c.patch_size, stride[2] * c.patch_size)
        halo4 = [c.stage_depths[3] * (k // 2) for k in k4]
        halo5 = [-(-(c.stage_depths[4] * (k // 2)) // s) for k, s in zip(k5, stride, strict=True)]
        halos = [max(a, b) for a, b in zip(halo4, halo5, strict=True)]
        overlaps = (_round_up(halos[0] * scale[0], 8), _round_up(max(halos[1:]) * scale[1], 32))
        min_cells = tuple(max(a, -(-b // s)) for a, b, s in zip(k4, k5, stride, strict=True))
        return cls(scale, min_cells, overlaps, stride[0], k5[0])

    def stage5_frames(self, cells: int, first: bool, trailing: bool) -> int:
        """Stage-5 frames of a tile of `cells` stage-4 frames (upstream's `stage5_pixel_shape_from_stage4`)."""
        frames = cells * self.stride_t - (first and self.stride_t == 2)
        return max(frames, self.stage5_kernel_t) if trailing else frames


def check_tiling(tiling: TileSizeConfig, geometry: TileGeometry, name: str = "tiling") -> None:
    """Raises `ValueError` naming the axis of `tiling` (the argument `name`) this decoder cannot tile with, the
    limit and the fix."""
    if not isinstance(tiling, TileSizeConfig):
        raise TypeError(f"{name} must be a TileSizeConfig (sizes and overlaps in frames / pixels), got {tiling!r}.")
    for axis, factor in zip(AXES, geometry.pixel_scale, strict=True):
        cfg: DimensionSizeConfig = getattr(tiling, axis)
        need = geometry.overlaps[axis != "frames"]
        if not cfg.is_tiled():
            continue
        if cfg.tile_size < 2 * factor or cfg.tile_size % factor or cfg.overlap % factor:
            raise ValueError(
                f"{name}.{axis}={cfg}: the diffusion decoder tiles in stage-4 cells of {factor} "
                f"{'frames' if axis == 'frames' else 'pixels'}; use a tile_size >= {2 * factor} and an overlap "
                f"that are multiples of {factor}."
            )
        if cfg.overlap < need:
            raise ValueError(
                f"{name}.{axis}.overlap={cfg.overlap} is below the {need} {'frames' if axis == 'frames' else 'px'} "
                f"the diffusion decoder's stage-4/5 halos span; set overlap >= {need} (and tile_size > overlap)."
            )


def _grown(intervals: list[DimensionInterval], min_cells: int, length: int, axis: str) -> list[DimensionInterval]:
    """upstream's `_grow_last_tile_to_min` then `_validate_tile_intervals`."""
    last = intervals[-1]
    if len(intervals) > 1 and last.end - last.start < min_cells:
        start, previous = last.end - min_cells, intervals[-2]
        overlap = previous.end - start
        intervals = [
            *intervals[:-2],
            dataclasses.replace(previous, right_ramp=overlap),
            dataclasses.replace(last, start=start, left_ramp=overlap),
        ]
    for i, iv in enumerate(intervals):
        size = iv.end - iv.start
        if size < min_cells or iv.left_ramp > size or iv.right_ramp > size:
            raise ValueError(
                f"tiling.{axis}: tile {i} spans {size} stage-4 cells of {length} (ramps {iv.left_ramp}, "
                f"{iv.right_ramp}); the diffusion decoder needs >= {min_cells} each: use a larger tile_size."
            )
    return intervals


def _split(length: int, cfg: DimensionSizeConfig, factor: int, min_cells: int, axis: str) -> list[DimensionInterval]:
    """One axis of `length` stage-4 cells (upstream's `to_splitters` axis and `split_by_size` with its floor)."""
    if not cfg.is_tiled() or length < min_cells:
        return [DimensionInterval(0, length, 0, 0)]
    overlap = cfg.overlap // factor
    size = max(2, overlap + 1, cfg.tile_size // factor)
    intervals = split_by_size(size, overlap)(length)
    return intervals if len(intervals) == 1 else _grown(intervals, min_cells, length, axis)


def _to_pixels(iv: DimensionInterval, stride: int, patch: int, causal: bool) -> DimensionInterval:
    """upstream's `_propagate_interval_through_upsample_hops` through upsample 4 (then the patch, spatially)."""
    start, end = iv.start * stride, iv.end * stride
    if causal and stride == 2:
        start, end = start - (iv.start != 0), end - 1
    return DimensionInterval(start * patch, end * patch, iv.left_ramp * stride * patch, iv.right_ramp * stride * patch)


@dataclasses.dataclass(frozen=True)
class DiffusionTile:
    """One tile: the stage-4 cells it owns (`cells`; a trailing tile also reads the trailing pad's frames after
    them), the pixels of the floored video it writes (`out`) with its blend masks, and its place in time."""

    cells: tuple[Bounds, Bounds, Bounds]
    out: tuple[Bounds, Bounds, Bounds]
    masks: tuple[np.ndarray, np.ndarray, np.ndarray] = dataclasses.field(compare=False, repr=False)
    first: bool  # holds the video's first frame: upsample 4 drops its duplicated leading frame
    trailing: bool  # reaches the volume's end: its stage-4 window takes the trailing pad, cropped after stage 4


def tile_schedule(tiling: TileSizeConfig, c: DiffusionDecoderConfig, cells: tuple[int, ...]) -> list[DiffusionTile]:
    """The tiles of stage-4 features of `cells` (T, H, W) content cells, time slowest (upstream's
    `prepare_tile_schedule`); `TileSizeConfig()` (nothing tiled) gives one tile."""
    geometry = TileGeometry.of(c)
    check_tiling(tiling, geometry)
    stride = c.upsamples[3][0]
    per_axis = []
    for i, axis in enumerate(AXES):
        intervals = _split(cells[i], getattr(tiling, axis), geometry.pixel_scale[i], geometry.min_cells[i], axis)
        specs = []
        for iv in intervals:
            px = _to_pixels(iv, stride[i], 1 if i == 0 else c.patch_size, causal=i == 0)
            mask = compute_trapezoidal_mask_1d(px.end - px.start, px.left_ramp, px.right_ramp, False)
            specs.append(((iv.start, iv.end), (px.start, px.end), mask))
        per_axis.append(specs)
    return [
        DiffusionTile(
            cells=(t[0], h[0], w[0]),
            out=(t[1], h[1], w[1]),
            masks=(t[2], h[2], w[2]),
            first=t[0][0] == 0,
            trailing=t[0][1] == cells[0],
        )
        for t in per_axis[0]
        for h in per_axis[1]
        for w in per_axis[2]
    ]


def stage4_cells(c: DiffusionDecoderConfig, latent_thw: tuple[int, int, int]) -> tuple[int, int, int]:
    """Stage-4 input (T, H, W) of a (floored) latent's (T', H', W'): three upsamples, each time x2 less a frame."""
    t, h, w = latent_thw
    for (st, sh, sw), _ in c.upsamples[:3]:
        t, h, w = t * st - (st == 2), h * sh, w * sw
    return t, h, w


def recommended_tiling(
    c: DiffusionDecoderConfig, *, frames: int, height: int, width: int, free_bytes: int, model_bytes: int
) -> TileSizeConfig:
    """Tile sizes for a `frames` x `height` x `width` video under `free_bytes` of device memory: upstream's
    `recommended_decode_tiling_config` for CHUNKED_EAGER (what ltx-pipelines' `AUTO_TILING` resolves to). Overlaps
    are the halos' (`TileGeometry.overlaps`); among the sizes on the 8-frame / 32-px grid whose estimated peak
    (stage-4 features of the whole video, a two-tile-long accumulator, stage 5's tokens x width x 5, in bf16) fits
    `free_bytes` less the decoder (at least 1 GiB) and 1 GiB, the least recomputed overlap, then the largest."""
    g = TileGeometry.of(c)
    overlap_t, overlap_px = g.overlaps
    minimum = [
        _round_up(max(2 * f, 2 * overlap, _round_up(cells * f, f), floor), step)
        for f, overlap, cells, floor, step in zip(
            g.pixel_scale, (overlap_t, overlap_px, overlap_px), g.min_cells, (16, 64, 64), _step(g), strict=True
        )
    ]
    latent = (1 + (frames - 1) // SCALE[0] + c.trailing_frames, height // SCALE[1], width // SCALE[2])
    features = math.prod(stage4_cells(c, latent)) * c.stage_channels[3] * _ELEMENT_BYTES
    usable = max(0, free_bytes - max(model_bytes, _MIN_MODEL_BYTES) - _SAFETY_BYTES - features)
    per_token = max(1.0, c.width * _ELEMENT_BYTES * _COEF_CHUNKED_EAGER)
    lengths, overlaps = (frames, height, width), (overlap_t, overlap_px, overlap_px)
    t_sizes, h_sizes, w_sizes = (
        _candidates(n, overlap, low, step)
        for n, overlap, low, step in zip(lengths, overlaps, minimum, _step(g), strict=True)
    )
    scored = []
    for tile_t, n_t in t_sizes:
        accumulator = 2 * tile_t * height * width * c.out_channels * _ELEMENT_BYTES
        if accumulator >= usable:
            continue
        max_tokens = int((usable - accumulator) // per_token)
        for tile_h, n_h in h_sizes:
            for tile_w, n_w in w_sizes:
                tokens = tile_t * max(1, tile_h // c.patch_size) * max(1, tile_w // c.patch_size)
                if tokens <= max_tokens:
                    waste = n_t * n_h * n_w * tile_t * tile_h * tile_w / max(1, frames * height * width)
                    scored.append((waste, -tile_t * tile_h * tile_w, n_t * n_h * n_w, tile_t, tile_h, tile_w))
    if not scored:
        raise ValueError(
            f"no diffusion-decoder tile of at least {minimum[0]} frames x {minimum[1]} x {minimum[2]} px fits in "
            f"{free_bytes} free bytes ({usable} usable after the decoder, 1 GiB held back and the stage-4 features' "
            f"{features}): pass the tiling explicitly (CheckpointFiles.video_decode_tiling), or free memory."
        )
    *_, tile_t, tile_h, tile_w = min(scored)
    return TileSizeConfig(
        DimensionSizeConfig(tile_t, overlap_t), DimensionSizeConfig(tile_h, overlap_px),
        DimensionSizeConfig(tile_w, overlap_px),
    )  # fmt: skip


def _step(g: TileGeometry) -> tuple[int, int, int]:
    return tuple(math.lcm(f, s) for f, s in zip(g.pixel_scale, _STEP, strict=True))


def _candidates(length: int, overlap: int, minimum: int, step: int) -> list[tuple[int, int]]:
    """(tile size, tile count) for every size on `step`'s grid from `minimum` to past `length` (`_axis_candidates`)."""
    top = max(_round_up(length, step), minimum)
    return [
        (size, len(split_by_size(size, overlap)(length))) for size in range(minimum, top + step, step) if size > overlap
    ]
