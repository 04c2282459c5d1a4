"""Residual blocks: `ResnetBlock` (2-d, audio VAE decoder) and `ResBlock1` (1-d, HiFi-GAN vocoder).

Source: `ltx_core/model/audio_vae/resnet.py`. `ResnetBlock` drops ltx-core's timestep-embedding
projection and dropout: the audio decoder builds it with `temb_channels=0` and runs in eval mode. `ResBlock2`
is not ported: no vocoder builds it (ltx-core's `Vocoder` picks `ResBlock1` or `AMPBlock1`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.causal_conv_2d import make_conv2d
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.common.normalization import NormType, build_normalization_layer
from ltx_jax.model.conv import Conv, conv_nd

LRELU_SLOPE = 0.1


class SameConv1d(Conv):
    """`torch.nn.Conv1d(..., padding="same")`: output length = input length; an odd total pad goes right."""

    def __init__(
        self, channels: int, kernel_size: int, dilation: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype
    ) -> None:
        super().__init__(channels, channels, kernel_size, ndim=1, dilation=dilation, rngs=rngs, param_dtype=param_dtype)
        total = dilation * (kernel_size - 1)
        self.same_padding = (total // 2, total - total // 2)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jnp.pad(x, ((0, 0), (0, 0), self.same_padding))
        return conv_nd(x, self.weight[...], self.bias[...], dilation=self.dilation)


class ResBlock1(nnx.Module):
    """HiFi-GAN block: three `x += conv2(lrelu(conv1(lrelu(x))))` steps, conv1 dilated by `dilation[i]`."""

    def __init__(
        self,
        channels: int,
        kernel_size: int = 3,
        dilation: tuple[int, int, int] = (1, 3, 5),
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.convs1 = nnx.List(
            [SameConv1d(channels, kernel_size, d, rngs=rngs, param_dtype=param_dtype) for d in dilation[:3]]
        )
        self.convs2 = nnx.List(
            [SameConv1d(channels, kernel_size, 1, rngs=rngs, param_dtype=param_dtype) for _ in range(3)]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, T)."""
        for conv1, conv2 in zip(self.convs1, self.convs2, strict=True):
            xt = conv1(jax.nn.leaky_relu(x, LRELU_SLOPE))
            x = conv2(jax.nn.leaky_relu(xt, LRELU_SLOPE)) + x
        return x


class ResnetBlock(nnx.Module):
    """`shortcut(x) + conv2(silu(norm2(conv1(silu(norm1(x))))))` on `(B, C, H, W)`, causal along `causality_axis`."""

    def __init__(
        self,
        *,
        in_channels: int,
        out_channels: int | None = None,
        conv_shortcut: bool = False,
        norm_type: NormType = NormType.GROUP,
        causality_axis: CausalityAxis = CausalityAxis.HEIGHT,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if causality_axis != CausalityAxis.NONE and norm_type == NormType.GROUP:
            raise ValueError(
                f"A causal ResnetBlock (causality_axis={causality_axis.value!r}) cannot use GroupNorm, which "
                "mixes time steps; use norm_type='pixel' or causality_axis=None."
            )
        out_channels = in_channels if out_channels is None else out_channels
        self.in_channels, self.out_channels = in_channels, out_channels
        self.use_conv_shortcut = conv_shortcut
        kw = {"causality_axis": causality_axis, "rngs": rngs, "param_dtype": param_dtype}
        self.norm1 = build_normalization_layer(in_channels, normtype=norm_type, param_dtype=param_dtype)
        self.conv1 = make_conv2d(in_channels, out_channels, kernel_size=3, stride=1, **kw)
        self.norm2 = build_normalization_layer(out_channels, normtype=norm_type, param_dtype=param_dtype)
        self.conv2 = make_conv2d(out_channels, out_channels, kernel_size=3, stride=1, **kw)
        if in_channels != out_channels:
            if conv_shortcut:
                self.conv_shortcut = make_conv2d(in_channels, out_channels, kernel_size=3, stride=1, **kw)
            else:
                self.nin_shortcut = make_conv2d(in_channels, out_channels, kernel_size=1, stride=1, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C_in, H, W) -> (B, C_out, H, W)."""
        h = self.conv1(jax.nn.silu(self.norm1(x)))
        h = self.conv2(jax.nn.silu(self.norm2(h)))
        if self.in_channels != self.out_channels:
            x = self.conv_shortcut(x) if self.use_conv_shortcut else self.nin_shortcut(x)
        return x + h
