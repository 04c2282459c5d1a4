"""The video VAE's attention block (`"attn"` in `encoder_blocks` / `decoder_blocks`), new in ltx-core 1.2.0.

Source: ltx-core 1.2.0 `model/video_vae/attention.py` (`AttnBlock3D`, `_RMSNorm2D`): per frame, single-head
self-attention over the frame's H x W positions (no attention across frames), after a channel RMSNorm
(`F.normalize` over channels times `sqrt(C) * gamma`); 1x1 convolutions make q, k, v and project back; the
input is added. Parameter paths as upstream's: `norm.gamma` (C, 1, 1), `to_qkv.weight` (3C, C, 1, 1),
`to_qkv.bias`, `proj.weight` (C, C, 1, 1), `proj.bias`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

_NORMALIZE_EPS = 1e-12  # torch.nn.functional.normalize's default


class RMSNorm2D(nnx.Module):
    """Over channels: `x / max(|x|, eps) * sqrt(C) * gamma` (torch's `F.normalize`), on (B, C, F, H, W)."""

    def __init__(self, channels: int, *, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.gamma = nnx.Param(jnp.ones((channels, 1, 1), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=1, keepdims=True))
        gamma = self.gamma[...].astype(x.dtype)[None, :, :, :, None]  # (1, C, 1, 1, 1)
        return x / jnp.maximum(norm, _NORMALIZE_EPS) * (jnp.sqrt(jnp.asarray(x.shape[1], x.dtype)) * gamma)


class Conv1x1(nnx.Module):
    """torch's `nn.Conv2d(kernel_size=1)` applied to every frame: `weight` (O, C, 1, 1), `bias` (O,)."""

    def __init__(self, channels: int, out: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        weight = nnx.initializers.lecun_normal()(rngs.params(), (out, channels), param_dtype)
        self.weight = nnx.Param(weight[..., None, None])
        self.bias = nnx.Param(jnp.zeros((out,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        weight, bias = self.weight[...].astype(x.dtype)[:, :, 0, 0], self.bias[...].astype(x.dtype)
        return jnp.einsum("oc,bcfhw->bofhw", weight, x) + bias[None, :, None, None, None]


class AttnBlock3D(nnx.Module):
    """(B, C, F, H, W) -> the same shape: `x + proj(attention(to_qkv(norm(x))))`, each frame on its own."""

    def __init__(self, channels: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.norm = RMSNorm2D(channels, param_dtype=param_dtype)
        self.to_qkv = Conv1x1(channels, 3 * channels, rngs=rngs, param_dtype=param_dtype)
        self.proj = Conv1x1(channels, channels, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array, causal: bool = True) -> jax.Array:  # noqa: ARG002 - the blocks' signature
        b, channels, f, h, w = x.shape
        qkv = self.to_qkv(self.norm(x))  # (B, 3C, F, H, W)
        tokens = qkv.transpose(0, 2, 3, 4, 1).reshape(b * f, h * w, 3, 1, channels)  # one head of width C
        out = jax.nn.dot_product_attention(*(tokens[:, :, i] for i in range(3)), implementation="xla")
        return x + self.proj(out.reshape(b, f, h, w, channels).transpose(0, 4, 1, 2, 3))
