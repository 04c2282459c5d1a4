"""N-d convolution with torch's weight layout, for the VAEs, the upsampler and the vocoder.

The weight keeps torch's `(out, in / groups, *kernel)` layout and the activations are channels
first, like `torch.nn.Conv{1,2,3}d`, so checkpoint tensors load without a transpose and a module's
code reads like its ltx-core twin. XLA picks the device layout itself, so the logical layout here
costs nothing at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

_SPATIAL = "DHW"


def _tuple(value: int | Sequence[int], n: int, name: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    if len(value) != n:
        raise ValueError(f"{name}={tuple(value)} has {len(value)} entries; a {n}-d convolution needs {n}.")
    return tuple(value)


def conv_nd(
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None = None,
    *,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> jax.Array:
    """`torch.nn.functional.conv{n}d`: x (B, C, *spatial), weight (O, C / groups, *kernel), zero padding."""
    n = weight.ndim - 2
    spatial = _SPATIAL[-n:] if n <= 3 else None
    if spatial is None:
        raise ValueError(f"weight has {weight.ndim} dims; conv_nd supports 1-d to 3-d convolutions.")
    pad = _tuple(padding, n, "padding")
    out = jax.lax.conv_general_dilated(
        x,
        weight.astype(x.dtype),
        window_strides=_tuple(stride, n, "stride"),
        padding=[(p, p) for p in pad],
        rhs_dilation=_tuple(dilation, n, "dilation"),
        dimension_numbers=(f"NC{spatial}", f"OI{spatial}", f"NC{spatial}"),
        feature_group_count=groups,
        precision=jax.lax.Precision.HIGHEST if x.dtype == jnp.float32 else None,
    )
    if bias is not None:
        out = out + bias.astype(x.dtype).reshape((1, -1) + (1,) * n)
    return out


class Conv(nnx.Module):
    """`torch.nn.Conv{n}d` (zero padding): parameters `weight` (O, I / groups, *kernel) and `bias` (O,)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        *,
        ndim: int,
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"groups={groups} must divide in_channels={in_channels} and out_channels={out_channels}.")
        kernel = _tuple(kernel_size, ndim, "kernel_size")
        fan_in = in_channels // groups * math.prod(kernel)
        bound = fan_in**-0.5
        shape = (out_channels, in_channels // groups, *kernel)
        self.weight = nnx.Param(jax.random.uniform(rngs.params(), shape, param_dtype, -bound, bound))
        self.bias = (
            nnx.Param(jax.random.uniform(rngs.params(), (out_channels,), param_dtype, -bound, bound)) if bias else None
        )
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def __call__(self, x: jax.Array) -> jax.Array:
        bias = None if self.bias is None else self.bias[...]
        return conv_nd(
            x,
            self.weight[...],
            bias,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=self.groups,
        )
