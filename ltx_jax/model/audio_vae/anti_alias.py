"""BigVGAN v2's anti-aliased activations and the transposed convolution, in torch's layouts.

Source: `ltx_core/model/audio_vae/vocoder.py` (kaiser-sinc helpers adopted from NVIDIA/BigVGAN), split
out of `vocoder.py` to keep files short. Activations are `(B, C, T)`. Kaiser filters are checkpoint
buffers (`<...>.upsample.filter`, `<...>.downsample.lowpass.filter`) initialized to the values
ltx-core computes; the Hann resampler of the bandwidth extension is computed, never stored.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model.audio_vae.ops import Buffer
from ltx_jax.model.conv import conv_nd

SNAKE_EPS = 1e-9
_HANN_ROLLOFF = 0.99  # torchaudio.functional.resample's defaults
_HANN_LOWPASS_WIDTH = 6


def conv_transpose_1d(
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None = None,
    *,
    stride: int = 1,
    padding: int = 0,
    groups: int = 1,
) -> jax.Array:
    """`torch.nn.functional.conv_transpose1d`: x (B, C_in, L), weight (C_in, C_out / groups, K) ->
    (B, C_out, (L - 1) * stride - 2 * padding + K): a stride-1 conv of the `stride`-dilated input with
    the flipped, in/out-swapped kernel."""
    c_in, c_out_per_group, k = weight.shape
    w = weight.reshape(groups, c_in // groups, c_out_per_group, k).transpose(0, 2, 1, 3)
    w = jnp.flip(w.reshape(groups * c_out_per_group, c_in // groups, k), axis=-1)
    edge = k - 1 - padding
    out = jax.lax.conv_general_dilated(
        x,
        w.astype(x.dtype),
        window_strides=(1,),
        padding=[(edge, edge)],
        lhs_dilation=(stride,),
        dimension_numbers=("NCW", "OIW", "NCW"),
        feature_group_count=groups,
        precision=jax.lax.Precision.HIGHEST if x.dtype == jnp.float32 else None,
    )
    return out if bias is None else out + bias.astype(x.dtype)[None, :, None]


class ConvTranspose1d(nnx.Module):
    """`torch.nn.ConvTranspose1d`: parameters `weight` (C_in, C_out, K) and `bias` (C_out,)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        *,
        stride: int = 1,
        padding: int = 0,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        bound = (out_channels * kernel_size) ** -0.5  # torch's fan-in for a transposed weight
        shape = (in_channels, out_channels, kernel_size)
        self.weight = nnx.Param(jax.random.uniform(rngs.params(), shape, param_dtype, -bound, bound))
        self.bias = nnx.Param(jax.random.uniform(rngs.params(), (out_channels,), param_dtype, -bound, bound))
        self.stride, self.padding = stride, padding

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C_in, L) -> (B, C_out, (L - 1) * stride - 2 * padding + K)."""
        return conv_transpose_1d(x, self.weight[...], self.bias[...], stride=self.stride, padding=self.padding)


def kaiser_sinc_filter1d(cutoff: float, half_width: float, kernel_size: int) -> np.ndarray:
    """Kaiser-windowed sinc low-pass (1, 1, kernel_size), summing to 1; cutoff in cycles per sample."""
    even = kernel_size % 2 == 0
    half_size = kernel_size // 2
    amplitude = 2.285 * (half_size - 1) * math.pi * 4 * half_width + 7.95
    if amplitude > 50.0:
        beta = 0.1102 * (amplitude - 8.7)
    elif amplitude >= 21.0:
        beta = 0.5842 * (amplitude - 21) ** 0.4 + 0.07886 * (amplitude - 21.0)
    else:
        beta = 0.0
    window = np.kaiser(kernel_size, beta)
    time = np.arange(-half_size, half_size) + 0.5 if even else np.arange(kernel_size) - half_size
    if cutoff == 0:
        return np.zeros((1, 1, kernel_size), np.float32)
    filter_ = 2 * cutoff * window * np.sinc(2 * cutoff * time)
    return (filter_ / filter_.sum()).astype(np.float32).reshape(1, 1, kernel_size)


@functools.cache
def hann_sinc_filter1d(ratio: int) -> np.ndarray:
    """The Hann-windowed sinc of `torchaudio.functional.resample` for integer upsampling, (1, 1, K)."""
    width = math.ceil(_HANN_LOWPASS_WIDTH / _HANN_ROLLOFF)
    time = (np.arange(2 * width * ratio + 1) / ratio - width) * _HANN_ROLLOFF
    clamped = np.clip(time, -_HANN_LOWPASS_WIDTH, _HANN_LOWPASS_WIDTH)
    window = np.cos(clamped * math.pi / _HANN_LOWPASS_WIDTH / 2) ** 2
    return (np.sinc(time) * window * _HANN_ROLLOFF / ratio).astype(np.float32).reshape(1, 1, -1)


def _depthwise(filter_: jax.Array, channels: int, dtype: jnp.dtype) -> jax.Array:
    return jnp.broadcast_to(filter_.astype(dtype), (channels, 1, filter_.shape[-1]))


class LowPassFilter1d(nnx.Module):
    """Depthwise kaiser-sinc low-pass with replicate padding and `stride`; buffer `filter` (1, 1, K)."""

    def __init__(self, cutoff: float = 0.5, half_width: float = 0.6, stride: int = 1, kernel_size: int = 12) -> None:
        if not 0.0 <= cutoff <= 0.5:
            raise ValueError(f"cutoff={cutoff} must lie in [0, 0.5] cycles per sample.")
        even = kernel_size % 2 == 0
        self.pad_left, self.pad_right = kernel_size // 2 - int(even), kernel_size // 2
        self.stride = stride
        self.filter = Buffer(jnp.asarray(kaiser_sinc_filter1d(cutoff, half_width, kernel_size)))

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, ceil(T / stride))."""
        x = jnp.pad(x, ((0, 0), (0, 0), (self.pad_left, self.pad_right)), mode="edge")
        channels = x.shape[1]
        return conv_nd(x, _depthwise(self.filter[...], channels, x.dtype), stride=self.stride, groups=channels)


class UpSample1d(nnx.Module):
    """`ratio`x upsampling: replicate pad, depthwise transposed conv with a sinc filter, crop.

    `window_type="kaiser"` (BigVGAN) keeps the filter as the buffer `filter`; `"hann"` (the BWE's
    skip path, `persistent=False` in ltx-core) computes it and stores nothing.
    """

    def __init__(
        self, ratio: int = 2, kernel_size: int | None = None, persistent: bool = True, window_type: str = "kaiser"
    ) -> None:
        self.ratio = ratio
        if window_type == "hann":
            width = math.ceil(_HANN_LOWPASS_WIDTH / _HANN_ROLLOFF)
            self.kernel_size = 2 * width * ratio + 1
            self.pad, self.pad_left, self.pad_right = width, 2 * width * ratio, self.kernel_size - ratio
        elif window_type == "kaiser":
            self.kernel_size = int(6 * ratio // 2) * 2 if kernel_size is None else kernel_size
            self.pad = self.kernel_size // ratio - 1
            self.pad_left = self.pad * ratio + (self.kernel_size - ratio) // 2
            self.pad_right = self.pad * ratio + (self.kernel_size - ratio + 1) // 2
        else:
            raise ValueError(f"window_type={window_type!r} is not supported; use 'kaiser' or 'hann'.")
        self.window_type = window_type
        if persistent:
            self.filter = Buffer(jnp.asarray(self._make_filter()))

    def _make_filter(self) -> np.ndarray:
        if self.window_type == "hann":
            return hann_sinc_filter1d(self.ratio)
        return kaiser_sinc_filter1d(cutoff=0.5 / self.ratio, half_width=0.6 / self.ratio, kernel_size=self.kernel_size)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, ratio * T)."""
        filter_ = self.filter[...] if hasattr(self, "filter") else jnp.asarray(self._make_filter())
        channels = x.shape[1]
        x = jnp.pad(x, ((0, 0), (0, 0), (self.pad, self.pad)), mode="edge")
        x = self.ratio * conv_transpose_1d(
            x, _depthwise(filter_, channels, x.dtype), stride=self.ratio, groups=channels
        )
        return x[..., self.pad_left : x.shape[-1] - self.pad_right]


class DownSample1d(nnx.Module):
    """`ratio`x anti-aliased downsampling through `lowpass` (a kaiser-sinc `LowPassFilter1d`)."""

    def __init__(self, ratio: int = 2, kernel_size: int | None = None) -> None:
        self.ratio = ratio
        self.kernel_size = int(6 * ratio // 2) * 2 if kernel_size is None else kernel_size
        self.lowpass = LowPassFilter1d(
            cutoff=0.5 / ratio, half_width=0.6 / ratio, stride=ratio, kernel_size=self.kernel_size
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, ceil(T / ratio))."""
        return self.lowpass(x)


class Snake(nnx.Module):
    """`x + sin(alpha x)^2 / alpha` per channel; parameter `alpha` (C,), stored as log(alpha) by default."""

    def __init__(
        self, in_features: int, alpha: float = 1.0, alpha_logscale: bool = True, *, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        self.alpha_logscale = alpha_logscale
        init = (
            jnp.zeros((in_features,), param_dtype) if alpha_logscale else jnp.full((in_features,), alpha, param_dtype)
        )
        self.alpha = nnx.Param(init)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, T)."""
        alpha = self.alpha[...].astype(x.dtype)[None, :, None]
        if self.alpha_logscale:
            alpha = jnp.exp(alpha)
        return x + (1.0 / (alpha + SNAKE_EPS)) * jnp.sin(x * alpha) ** 2


class SnakeBeta(nnx.Module):
    """`x + sin(alpha x)^2 / beta` per channel; parameters `alpha`, `beta` (C,), log-scale by default."""

    def __init__(
        self, in_features: int, alpha: float = 1.0, alpha_logscale: bool = True, *, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        self.alpha_logscale = alpha_logscale
        init = (
            jnp.zeros((in_features,), param_dtype) if alpha_logscale else jnp.full((in_features,), alpha, param_dtype)
        )
        self.alpha = nnx.Param(init)
        self.beta = nnx.Param(init)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, T)."""
        alpha = self.alpha[...].astype(x.dtype)[None, :, None]
        beta = self.beta[...].astype(x.dtype)[None, :, None]
        if self.alpha_logscale:
            alpha, beta = jnp.exp(alpha), jnp.exp(beta)
        return x + (1.0 / (beta + SNAKE_EPS)) * jnp.sin(x * alpha) ** 2


class Activation1d(nnx.Module):
    """Anti-aliased activation: `downsample(act(upsample(x)))`, 2x each way with 12-tap kaiser filters."""

    def __init__(
        self,
        activation: Snake | SnakeBeta,
        up_ratio: int = 2,
        down_ratio: int = 2,
        up_kernel_size: int = 12,
        down_kernel_size: int = 12,
    ) -> None:
        self.act = activation
        self.upsample = UpSample1d(up_ratio, up_kernel_size)
        self.downsample = DownSample1d(down_ratio, down_kernel_size)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, T)."""
        return self.downsample(self.act(self.upsample(x)))
