"""LTX-2.5's diffusion video decoder: (B, 128, T', H', W') latents -> (B, 3, 1 + 8 (T' - 1), 32 H', 32 W') pixels.

Source: ltx-core 1.2.0 `model/video_vae/diffusion_video_decoder.py` (`DiffusionVideoDecoder`, the decoder of a
`CausalDiffusionVAE` file) and `diffusion_tiling.py` (its size floors, trailing-frame pad and crops), in the
default `DiffVAEMode.CHUNKED_EAGER` (what ltx-pipelines installs; on a host without natten it runs the eager
tiled-SDPA neighbourhood attention that `neighborhood_attention.py` ports). An untiled decode of the whole
latent (upstream's `forward`, `tiling_config=None`):

1. The latent is padded up to the size floors (time: the last frame repeated; height and width: both edges
   repeated) and its last frame is repeated (k_t // 2) * 2 more times (upstream's NATTEN border workaround).
2. Per-channel un-normalise, `conv_in`, stages 1-3: `NABlock`s then a `LinearPixelShuffleUpsample` each (a
   time x2 drops its duplicated first frame).
3. Stage 4 gives the context: its blocks, the repeated frames cropped off again, its upsample.
4. Stage 5, `default_num_inference_steps` Euler steps over t = linspace(1, 1 / n, n) from the CALLER's
   Gaussian noise (`noise_shape` says its shape; upstream draws it with `torch.randn`): the noisy pixels,
   4x4-patchified, through `conv_in_x_t`, `DiffusionNABlock`s (each adds its projection of the context),
   `norm_out`, `conv_out`, unpatchified; the prediction is a velocity ("v") or the clean video ("x0").
5. The video is cropped back to the latent's own size.

Upstream injects the context per block from stage 4's pre-upsample features, W slab by W slab; upsampling and
projecting are per-position linear maps, so projecting the upsampled, cropped context (as here) is the same.
The tiled decode (stages 4-5 per tile, over devices) is `diffusion_tiled_decode.py`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model.normalization import RMSNorm, linear
from ltx_jax.model.timestep_embedding import PixArtAlphaCombinedTimestepSizeEmbeddings
from ltx_jax.model.video_vae.diffusion_blocks import (
    NORM_EPS,
    AdaLNZero,
    DiffusionNABlock,
    Kernel,
    LinearPixelShuffleUpsample,
    NABlock,
    WChunkPlan,
)
from ltx_jax.model.video_vae.ops import PerChannelStatistics, patchify, unpatchify

SCALE = (8, 32, 32)  # upstream's fixed `video_downscale_factors` (time, height, width)
CHUNKED_W_CHUNKS = 4  # `DiffVAEMode.CHUNKED_EAGER`'s W split (`transformer/config.py::_CHUNKED_W_CHUNKS`)
Upsample = tuple[Kernel, int]  # (stride (t, h, w), channel reduction)


@dataclasses.dataclass(frozen=True)
class DiffusionDecoderConfig:
    """`DiffusionVideoDecoder`'s arguments with upstream's class defaults (a file's `vae.decoder` config and
    `vae.model_output_type` override them), plus `w_chunks`, the decode mode's W split (not in the file)."""

    in_channels: int = 128
    out_channels: int = 3
    patch_size: int = 4
    head_dim: int = 64
    rope_dim_split: tuple[int, int, int] | None = None
    stage_channels: tuple[int, ...] = (1024, 512, 256, 256, 128)
    stage_depths: tuple[int, ...] = (4, 6, 4, 2, 8)
    stage_kernels: tuple[Kernel, ...] = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5), (3, 3, 3))
    upsamples: tuple[Upsample, ...] = (((1, 2, 2), 2), ((2, 1, 1), 2), ((2, 2, 2), 1), ((2, 2, 2), 2))
    stage5_kernel: Kernel = (3, 7, 7)
    stage5_channels: int | None = None
    t_emb_dim: int = 384
    default_num_inference_steps: int = 2
    timestep_scale_multiplier: float = 1.0
    model_output_type: Literal["v", "x0"] = "v"
    w_chunks: int = CHUNKED_W_CHUNKS

    def __post_init__(self) -> None:
        problems = _config_problems(self)
        if problems:
            raise ValueError("diffusion decoder config: " + "; ".join(problems) + ".")

    @property
    def context_channels(self) -> int:
        return self.stage_channels[-1]

    @property
    def width(self) -> int:
        """Stage 5's width (`stage5_channels`, else the context's)."""
        return self.stage5_channels or self.context_channels

    @property
    def trailing_frames(self) -> int:
        """Latent frames repeated past the end for the NATTEN border (upstream: (k_t // 2) * 2 of stage 1)."""
        return self.stage_kernels[0][0] // 2 * 2

    def size_floors(self) -> Kernel:
        """Latent (T, H, W) below which the latent is padded: every stage's attention sees >= its kernel."""
        floors, strides = [1, 1, 1], (1, 1, 1)
        for kernel, (stride, _) in zip(self.stage_kernels[:4], self.upsamples, strict=True):
            floors = [max(f, -(-k // s)) for f, k, s in zip(floors, kernel, strides, strict=True)]
            strides = tuple(a * b for a, b in zip(strides, stride, strict=True))
        return tuple(max(f, -(-k // s)) for f, k, s in zip(floors, self.stage5_kernel, strides, strict=True))


def _config_problems(c: DiffusionDecoderConfig) -> list[str]:
    problems = []
    if not len(c.stage_channels) == len(c.stage_depths) == len(c.stage_kernels) == len(c.upsamples) + 1 == 5:
        problems.append("stage_channels, stage_depths, stage_kernels need 5 entries and upsamples 4")
        return problems
    if any(ch % c.head_dim for ch in (*c.stage_channels, c.width)):
        problems.append(f"every stage width {(*c.stage_channels, c.width)} must be a multiple of head_dim={c.head_dim}")
    if any(k < 1 or k % 2 == 0 for kernel in (*c.stage_kernels, c.stage5_kernel) for k in kernel):
        problems.append(f"kernels must be odd: {c.stage_kernels}, stage5_kernel={c.stage5_kernel}")
    for i, (_, reduction) in enumerate(c.upsamples):
        if c.stage_channels[i] % reduction or c.stage_channels[i] // reduction != c.stage_channels[i + 1]:
            problems.append(f"upsample {i} turns {c.stage_channels[i]} channels into {c.stage_channels[i + 1]}")
    strides = [stride for stride, _ in c.upsamples]
    if any(s[0] not in (1, 2) for s in strides) or math.prod(s[0] for s in strides) != SCALE[0]:
        problems.append(f"the time strides {[s[0] for s in strides]} must be 1 or 2 and multiply to {SCALE[0]}")
    for axis in (1, 2):
        if math.prod(s[axis] for s in strides) * c.patch_size != SCALE[axis]:
            problems.append(f"the spatial strides {strides} times patch_size={c.patch_size} must give {SCALE[axis]}")
    if c.model_output_type not in ("v", "x0"):
        problems.append(f"model_output_type={c.model_output_type!r} is not 'v' or 'x0'")
    if c.default_num_inference_steps < 1 or c.w_chunks < 1:
        problems.append("default_num_inference_steps and w_chunks must be >= 1")
    return problems


def _resize_axis(x: jax.Array, axis: int, size: int, mode: Literal["repeat_last", "symmetric"]) -> jax.Array:
    """upstream's `resize_axis`: pad by repeating edge slices or crop, to `size` along `axis`; "repeat_last"
    works at the end only, "symmetric" splits the difference (the odd one at the end)."""
    length = x.shape[axis]
    before = 0 if mode == "repeat_last" else abs(size - length) // 2
    if length < size:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (before, size - length - before)
        return jnp.pad(x, widths, mode="edge")
    return jax.lax.slice_in_dim(x, before, before + size, axis=axis)


def timesteps(steps: int) -> np.ndarray:
    """(steps,) float32 `linspace(1, 1 / steps, steps)`, upstream's `default_inference_timesteps`."""
    return np.linspace(1.0, 1.0 / steps, steps).astype(np.float32)


class DiffusionVideoDecoder(nnx.Module):
    """Upstream's `DiffusionVideoDecoder`, same parameter paths (after its loader's renames, splits and folds).

    `decoder(latent, noise)` decodes a whole latent untiled; the stage methods (`stem`, `det_stage`,
    `context`, `step`) are the pieces it runs, on channels-last (B, T, H, W, C) features.
    """

    def __init__(self, config: DiffusionDecoderConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.config, self.param_dtype = config, param_dtype
        c, common = config, {"rngs": rngs, "param_dtype": param_dtype}
        attention = {"head_dim": c.head_dim, "rope_dim_split": c.rope_dim_split, **common}
        self.per_channel_statistics = PerChannelStatistics(c.in_channels, param_dtype=param_dtype)
        self.conv_in = linear(c.in_channels, c.stage_channels[0], **common)
        self.det_stages = nnx.List(
            nnx.List(NABlock(c.stage_channels[i], c.stage_kernels[i], **attention) for _ in range(c.stage_depths[i]))
            for i in range(4)
        )
        self.upsamples = nnx.List(
            LinearPixelShuffleUpsample(c.stage_channels[i], stride, reduction, **common)
            for i, (stride, reduction) in enumerate(c.upsamples)
        )
        self.t_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(c.t_emb_dim, **common)
        pixel_channels = c.out_channels * c.patch_size**2
        self.conv_in_x_t = linear(pixel_channels, c.width, **common)
        self.shared_adaln = AdaLNZero(c.width, c.t_emb_dim, **common)
        self.diff_blocks = nnx.List(
            DiffusionNABlock(c.width, c.stage5_kernel, c.context_channels, **attention)
            for _ in range(c.stage_depths[-1])
        )
        self.norm_out = RMSNorm(c.width, eps=NORM_EPS, param_dtype=param_dtype)
        self.conv_out = linear(c.width, pixel_channels, **common)

    # Geometry (static: Python ints from shapes).

    def work_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(B, C, T', H', W') -> the latent's shape after the size floors."""
        return (
            *latent_shape[:2],
            *(max(n, f) for n, f in zip(latent_shape[2:], self.config.size_floors(), strict=True)),
        )

    def stage5_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(B, C, T', H', W') -> (B, 3, F, H, W) of stage 5's pixels (upstream's `stage5_pixel_shape_from_stage4`)."""
        b, _, t, h, w = self.work_shape(latent_shape)
        for stride, _ in self.config.upsamples[:3]:
            t, h, w = t * stride[0] - (stride[0] == 2), h * stride[1], w * stride[2]
        (st, sh, sw), _ = self.config.upsamples[3]
        frames = max(t * st - (st == 2), self.config.stage5_kernel[0])
        p = self.config.patch_size
        return (b, self.config.out_channels, frames, h * sh * p, w * sw * p)

    def video_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(B, C, T', H', W') -> (B, 3, F, H, W) of the floored latent's video: the whole-video noise upstream draws."""
        b, _, t, h, w = self.work_shape(latent_shape)
        return (b, self.config.out_channels, (t - 1) * SCALE[0] + 1, h * SCALE[1], w * SCALE[2])

    def noise_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the standard-normal noise `__call__` takes for a latent of `latent_shape`: what upstream
        draws from the pipeline's generator (the whole floored video, or with one x0 step stage 5's pixels)."""
        if self.config.default_num_inference_steps == 1 and self.config.model_output_type == "x0":
            return self.stage5_shape(latent_shape)
        return self.video_shape(latent_shape)

    # Stages.

    def pad(self, latent: jax.Array) -> jax.Array:
        """(B, C, T', H', W') -> the latent padded up to the size floors, its last frame then repeated
        `trailing_frames` more times."""
        floors = self.config.size_floors()
        x = latent if latent.shape[2] >= floors[0] else _resize_axis(latent, 2, floors[0], "repeat_last")
        for axis in (3, 4):
            x = x if x.shape[axis] >= floors[axis - 2] else _resize_axis(x, axis, floors[axis - 2], "symmetric")
        return _resize_axis(x, 2, x.shape[2] + self.config.trailing_frames, "repeat_last")

    def stem(self, padded: jax.Array) -> jax.Array:
        """(B, C, T, H, W) padded latent -> (B, T, H, W, stage_channels[0]): un-normalise, `conv_in`."""
        return self.conv_in(self.per_channel_statistics.un_normalize(padded).transpose(0, 2, 3, 4, 1))

    def det_stage(self, x: jax.Array, i: int) -> jax.Array:
        """Stage i + 1 (i = 0..3): its `NABlock`s, then its upsampler (dropping a time x2's first frame)."""
        for block in self.det_stages[i]:
            x = block(x)
        return self.upsamples[i](x, drop_leading_frame=True)

    def context(self, x: jax.Array, *, first: bool = True, trailing: bool = True) -> jax.Array:
        """Stage 4 on stage 3's output (or a tile of it): (B, F, H, W, context_channels). Its `NABlock`s; for the
        volume's end (`trailing`) the frames the trailing pad added cropped at stage 4's resolution, keeping at
        least ceil(k_t / s_t) (upstream's `crop_trailing_context_natten_pad` as the CHUNKED modes call it); then
        upsample 4, dropping a time x2's duplicated first frame only where the volume holds the video's (`first`)."""
        for block in self.det_stages[3]:
            x = block(x)
        stride = self.config.upsamples[3][0][0]
        if trailing and self.config.trailing_frames > 0:
            content = max(x.shape[1] - self.config.trailing_frames * (SCALE[0] // stride), 1)
            x = x[:, : min(x.shape[1], max(content, -(-self.config.stage5_kernel[0] // stride)))]
        return self.upsamples[3](x, drop_leading_frame=first)

    def step(self, context: jax.Array, x_t: jax.Array, t: jax.Array) -> jax.Array:
        """One stage-5 model call. context: (B, F, H / p, W / p, context_channels); x_t: (B, 3, F, H, W) noisy
        pixels at time t: (B,). Returns the (B, 3, F, H, W) prediction (velocity or clean video)."""
        c = self.config
        x = self.conv_in_x_t(patchify(x_t.astype(self.param_dtype), c.patch_size, 1).transpose(0, 2, 3, 4, 1))
        if x.shape[1:4] != context.shape[1:4]:
            raise ValueError(f"stage 5's noisy pixels give {x.shape[1:4]} tokens, the context {context.shape[1:4]}.")
        t_emb = self.t_embedder(c.timestep_scale_multiplier * t.astype(jnp.float32), hidden_dtype=x.dtype)
        modulation = self.shared_adaln(t_emb)
        plan = WChunkPlan.build(x.shape[3], c.w_chunks, c.stage5_kernel[2] // 2)
        for block in self.diff_blocks:
            x = block(x, context, modulation, plan)
        x = self.conv_out(self.norm_out(x))
        return unpatchify(x.transpose(0, 4, 1, 2, 3), c.patch_size, 1)

    def __call__(self, latent: jax.Array, noise: jax.Array) -> jax.Array:
        """(B, C, T', H', W') normalized latent, `noise_shape(latent.shape)` standard-normal noise -> the
        (B, 3, 1 + 8 (T' - 1), 32 H', 32 W') video in ~[-1, 1] (not clamped), in the latent's dtype."""
        self._check_inputs(latent, noise)
        x = self.stem(self.pad(latent.astype(self.param_dtype)))
        for i in range(3):
            x = self.det_stage(x, i)
        context = self.context(x)
        pixels = self.denoise(context, self._initial_noise(latent.shape, noise))
        return self._crop(pixels, latent.shape).astype(latent.dtype)

    def _check_inputs(self, latent: jax.Array, noise: jax.Array) -> None:
        if latent.ndim != 5 or latent.shape[1] != self.config.in_channels:
            raise ValueError(
                f"latent must be (B, {self.config.in_channels}, T', H', W') latents, got shape {latent.shape}."
            )
        expected = self.noise_shape(latent.shape)
        if noise.shape != expected:
            raise ValueError(
                f"noise has shape {noise.shape}; a latent of shape {latent.shape} needs {expected} "
                "(`decoder.noise_shape(latent.shape)`), standard normal."
            )

    def _initial_noise(self, latent_shape: tuple[int, ...], noise: jax.Array) -> jax.Array:
        """The caller's noise fitted to stage 5's pixels as upstream fits its draw (time: the end repeated or
        cut; height, width: both edges), in the compute dtype."""
        _, _, frames, height, width = self.stage5_shape(latent_shape)
        x = _resize_axis(noise.astype(self.param_dtype), 2, frames, "repeat_last")
        return _resize_axis(_resize_axis(x, 3, height, "symmetric"), 4, width, "symmetric")

    def denoise(self, context: jax.Array, x_t: jax.Array) -> jax.Array:
        """Euler from t = 1 over upstream's timesteps; the last step goes to t = 0 (or returns x0)."""
        c, batch = self.config, x_t.shape[0]
        grid = timesteps(c.default_num_inference_steps)
        for i, t_now in enumerate(grid):
            model_out = self.step(context, x_t, jnp.full((batch,), t_now)).astype(jnp.float32)
            if i == len(grid) - 1 and c.model_output_type == "x0":
                return model_out
            t_next = grid[i + 1] if i + 1 < len(grid) else np.float32(0.0)
            x_f32 = x_t.astype(jnp.float32)
            velocity = model_out if c.model_output_type == "v" else (x_f32 - model_out) / t_now
            x_t = (x_f32 - (t_now - t_next) * velocity).astype(x_t.dtype)
        return x_t

    def _crop(self, pixels: jax.Array, latent_shape: tuple[int, ...]) -> jax.Array:
        """Stage 5's pixels -> the latent's own video: the floored video's frames, then the content (the size
        floors padded the latent's end in time and both sides in space)."""
        _, _, t, h, w = latent_shape
        _, _, wt, wh, ww = self.work_shape(latent_shape)
        x = _resize_axis(pixels, 2, (wt - 1) * SCALE[0] + 1, "repeat_last")[:, :, : (t - 1) * SCALE[0] + 1]
        top, left = (wh - h) // 2 * SCALE[1], (ww - w) // 2 * SCALE[2]
        x = _resize_axis(_resize_axis(x, 3, wh * SCALE[1], "symmetric"), 4, ww * SCALE[2], "symmetric")
        return x[:, :, :, top : top + h * SCALE[1], left : left + w * SCALE[2]]
