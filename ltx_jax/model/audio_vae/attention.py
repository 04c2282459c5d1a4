"""Single-head self-attention over all `H * W` positions of a `(B, C, H, W)` feature map.

Source: `ltx_core/model/audio_vae/attention.py`. q, k, v and proj_out are 1x1 convolutions (keys
`q.weight`, ..., `proj_out.bias`); the softmax runs in float32.
"""

from __future__ import annotations

from enum import Enum

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.common.normalization import NormType, build_normalization_layer
from ltx_jax.model.conv import Conv
from ltx_jax.model.normalization import Identity


class AttentionType(Enum):
    """Attention mechanism of the VAE blocks; only VANILLA and NONE exist in ltx-core."""

    VANILLA = "vanilla"
    LINEAR = "linear"
    NONE = "none"


class AttnBlock(nnx.Module):
    """`x + proj_out(softmax(q k^T / sqrt(C)) v)` with q, k, v from the normalized `x`."""

    def __init__(
        self,
        in_channels: int,
        norm_type: NormType = NormType.GROUP,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.in_channels = in_channels
        self.norm = build_normalization_layer(in_channels, normtype=norm_type, param_dtype=param_dtype)

        def conv1x1() -> Conv:
            return Conv(in_channels, in_channels, 1, ndim=2, rngs=rngs, param_dtype=param_dtype)

        self.q, self.k, self.v, self.proj_out = conv1x1(), conv1x1(), conv1x1(), conv1x1()

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, H, W) -> (B, C, H, W)."""
        h_ = self.norm(x)
        b, c, h, w = x.shape
        q, k, v = (proj(h_).reshape(b, c, h * w) for proj in (self.q, self.k, self.v))
        precision = jax.lax.Precision.HIGHEST if x.dtype == jnp.float32 else None
        scores = jnp.einsum("bcq,bck->bqk", q, k, precision=precision) * (int(c) ** -0.5)
        weights = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
        out = jnp.einsum("bck,bqk->bcq", v, weights, precision=precision).reshape(b, c, h, w)
        return x + self.proj_out(out)


def make_attn(
    in_channels: int,
    attn_type: AttentionType = AttentionType.VANILLA,
    norm_type: NormType = NormType.GROUP,
    *,
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype = jnp.float32,
) -> AttnBlock | Identity:
    """An `AttnBlock` (VANILLA) or an `Identity` (NONE); LINEAR is not implemented in ltx-core either."""
    match attn_type:
        case AttentionType.VANILLA:
            return AttnBlock(in_channels, norm_type=norm_type, rngs=rngs, param_dtype=param_dtype)
        case AttentionType.NONE:
            return Identity()
        case AttentionType.LINEAR:
            raise NotImplementedError(
                f"attn_type={attn_type.value!r} is not supported (nor by ltx-core); use 'vanilla'."
            )
        case _:
            raise ValueError(f"attn_type={attn_type!r} is not an AttentionType; use one of {list(AttentionType)}.")
