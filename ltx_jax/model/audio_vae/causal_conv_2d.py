"""A 2-d convolution that is causal along one axis, by padding that axis on the past side only.

Source: `ltx_core/model/audio_vae/causal_conv_2d.py`. Tensors are `(B, C, H, W)`; in the audio VAE
H is time and W is frequency. The inner convolution is `conv` (keys `<name>.conv.weight`, `.bias`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.conv import Conv


def _pair(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


class CausalConv2d(nnx.Module):
    """Zero-pads `(B, C, H, W)` so output `t` sees only inputs `<= t` along `causality_axis`, then convolves."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int = 1,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        causality_axis: CausalityAxis = CausalityAxis.HEIGHT,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        kernel, dil = _pair(kernel_size), _pair(dilation)
        pad_h, pad_w = (kernel[0] - 1) * dil[0], (kernel[1] - 1) * dil[1]
        centred_h, centred_w = (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2)
        match causality_axis:
            case CausalityAxis.NONE:
                self.padding = (centred_h, centred_w)
            case CausalityAxis.WIDTH | CausalityAxis.WIDTH_COMPATIBILITY:
                self.padding = (centred_h, (pad_w, 0))
            case CausalityAxis.HEIGHT:
                self.padding = ((pad_h, 0), centred_w)
            case _:
                raise ValueError(
                    f"causality_axis={causality_axis!r} is not a CausalityAxis; use one of {list(CausalityAxis)}."
                )
        self.causality_axis = causality_axis
        self.conv = Conv(
            in_channels,
            out_channels,
            kernel,
            ndim=2,
            stride=stride,
            dilation=dil,
            groups=groups,
            bias=bias,
            rngs=rngs,
            param_dtype=param_dtype,
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C_in, H, W) -> (B, C_out, H', W') (H' = H, W' = W at stride 1)."""
        return self.conv(jnp.pad(x, ((0, 0), (0, 0), *self.padding)))


def make_conv2d(
    in_channels: int,
    out_channels: int,
    kernel_size: int | tuple[int, int],
    stride: int = 1,
    padding: int | tuple[int, int] | None = None,
    dilation: int = 1,
    groups: int = 1,
    bias: bool = True,
    causality_axis: CausalityAxis | None = None,
    *,
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype = jnp.float32,
) -> CausalConv2d | Conv:
    """A `CausalConv2d` when `causality_axis` is given (even `CausalityAxis.NONE`), else a plain 2-d `Conv`
    with symmetric `padding` (default `kernel_size // 2`)."""
    if causality_axis is not None:
        return CausalConv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            dilation,
            groups,
            bias,
            causality_axis,
            rngs=rngs,
            param_dtype=param_dtype,
        )
    if padding is None:
        padding = tuple(k // 2 for k in _pair(kernel_size))
    return Conv(
        in_channels,
        out_channels,
        kernel_size,
        ndim=2,
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
        bias=bias,
        rngs=rngs,
        param_dtype=param_dtype,
    )
