"""N-d pixel shuffle: channels -> (frames, height, width) factors.

Source: `ltx_core/model/upsampler/pixel_shuffle.py`. No parameters.
"""

from __future__ import annotations

import jax
from flax import nnx


def pixel_shuffle_nd(x: jax.Array, dims: int, upscale_factors: tuple[int, ...] = (2, 2, 2)) -> jax.Array:
    """einops' `b (c p1 .. pn) d1 .. dn -> b c (d1 p1) .. (dn pn)` over the last `dims` axes.

    dims=3: (B, C*p1*p2*p3, D, H, W) -> (B, C, D*p1, H*p2, W*p3); dims=2: (B, C*p1*p2, H, W) ->
    (B, C, H*p1, W*p2); dims=1: (B, C*p1, F, H, W) -> (B, C, F*p1, H, W) (the frame axis only).
    """
    if dims not in (1, 2, 3):
        raise ValueError(f"dims={dims!r}; pixel_shuffle_nd supports 1 (frames), 2 (height, width) or 3 (all).")
    factors = tuple(upscale_factors[:dims])
    b, c, *spatial = x.shape
    # dims=1 shuffles only the first of the (F, H, W) axes; H and W ride along untouched.
    shuffled, rest = spatial[:dims], spatial[dims:]
    channels = c
    for p in factors:
        channels //= p
    x = x.reshape(b, channels, *factors, *shuffled, *rest)
    # (b, c, p1..pn, d1..dn, rest) -> (b, c, d1, p1, .., dn, pn, rest)
    order = [0, 1]
    for i in range(dims):
        order += [2 + dims + i, 2 + i]
    order += list(range(2 + 2 * dims, x.ndim))
    x = x.transpose(order)
    return x.reshape(b, channels, *(d * p for d, p in zip(shuffled, factors, strict=True)), *rest)


class PixelShuffleND(nnx.Module):
    """`PixelShuffleND(dims, upscale_factors)`: see `pixel_shuffle_nd`."""

    def __init__(self, dims: int, upscale_factors: tuple[int, ...] = (2, 2, 2)) -> None:
        if dims not in (1, 2, 3):
            raise ValueError(f"dims={dims!r}; PixelShuffleND supports 1 (frames), 2 (height, width) or 3 (all).")
        self.dims = dims
        self.upscale_factors = tuple(upscale_factors)

    def __call__(self, x: jax.Array) -> jax.Array:
        return pixel_shuffle_nd(x, self.dims, self.upscale_factors)
