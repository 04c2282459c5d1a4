"""Causal 3-D convolution of the video VAE.

Source: `ltx_core/model/video_vae/convolution.py`. Every convolution the LTX-2 VAE builds is a
`CausalConv3d` (`make_conv_nd(dims=3, causal=True)`) or a 1x1x1 `nn.Conv3d` (`make_linear_nd`);
the 2-D and `DualConv3d` variants serve `dims=2` / `(2, 1)` configs that no LTX-2 checkpoint uses
and are not ported.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.conv import Conv
from ltx_jax.model.video_vae.enums import PaddingModeType

# torch's non-zero `padding_mode`s as `jnp.pad` modes (torch "reflect" excludes the edge, as numpy's does).
_PAD_MODES = {PaddingModeType.REFLECT: "reflect", PaddingModeType.REPLICATE: "edge", PaddingModeType.CIRCULAR: "wrap"}


class CausalConv3d(nnx.Module):
    """Conv3d that pads time by repeating edge frames: `conv.weight` (O, I / groups, k, k, k), `conv.bias` (O,).

    Height and width are padded by `k // 2` with `spatial_padding_mode`. Time is padded with `k - 1`
    copies of the first frame (`causal=True`), or `(k - 1) // 2` copies of the first and of the last
    frame (`causal=False`), so (B, C, F, H, W) -> (B, O, F / stride_t, H / stride_h, W / stride_w).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        *,
        stride: int | tuple[int, int, int] = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        spatial_padding_mode: PaddingModeType = PaddingModeType.ZEROS,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.time_kernel_size = kernel_size
        self.spatial_pad = kernel_size // 2
        self.pad_mode = _PAD_MODES.get(spatial_padding_mode)
        # Zero padding is folded into the convolution; other modes pad explicitly, as torch does.
        padding = (0, self.spatial_pad, self.spatial_pad) if self.pad_mode is None else 0
        self.conv = Conv(
            in_channels,
            out_channels,
            kernel_size,
            ndim=3,
            stride=stride,
            padding=padding,
            dilation=(dilation, 1, 1),
            groups=groups,
            bias=bias,
            rngs=rngs,
            param_dtype=param_dtype,
        )

    def __call__(self, x: jax.Array, causal: bool = True) -> jax.Array:
        k = self.time_kernel_size
        first, last = x[:, :, :1], x[:, :, -1:]
        if causal:
            x = jnp.concatenate([jnp.repeat(first, k - 1, axis=2), x], axis=2)
        else:
            side = (k - 1) // 2
            x = jnp.concatenate([jnp.repeat(first, side, axis=2), x, jnp.repeat(last, side, axis=2)], axis=2)
        if self.pad_mode is not None:
            p = self.spatial_pad
            x = jnp.pad(x, ((0, 0), (0, 0), (0, 0), (p, p), (p, p)), mode=self.pad_mode)
        return self.conv(x)


def make_linear_nd(in_channels: int, out_channels: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> Conv:
    """`make_linear_nd(dims=3)`: a 1x1x1 `nn.Conv3d` (`weight` (O, I, 1, 1, 1), `bias` (O,))."""
    return Conv(in_channels, out_channels, 1, ndim=3, rngs=rngs, param_dtype=param_dtype)
