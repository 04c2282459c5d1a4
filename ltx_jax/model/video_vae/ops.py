"""Space-to-channel patchify and the latent per-channel statistics.

Source: `ltx_core/model/video_vae/ops.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from einops import rearrange
from flax import nnx

MEAN_KEY, STD_KEY = "mean-of-means", "std-of-means"  # checkpoint buffer names (hyphens included)


def patchify(x: jax.Array, patch_size_hw: int, patch_size_t: int = 1) -> jax.Array:
    """(B, C, F, H, W) -> (B, C * p * q * q, F / p, H / q, W / q) with q = patch_size_hw, p = patch_size_t.

    Channels are ordered (c, p, r, q) with r the width offset before q the height offset, as ltx-core.
    """
    if patch_size_hw == 1 and patch_size_t == 1:
        return x
    if x.ndim != 5:
        raise ValueError(f"patchify expects (B, C, F, H, W) video, got shape {x.shape}.")
    return rearrange(x, "b c (f p) (h q) (w r) -> b (c p r q) f h w", p=patch_size_t, q=patch_size_hw, r=patch_size_hw)


def unpatchify(x: jax.Array, patch_size_hw: int, patch_size_t: int = 1) -> jax.Array:
    """Inverse of `patchify`: (B, C * p * q * q, F, H, W) -> (B, C, F * p, H * q, W * q)."""
    if patch_size_hw == 1 and patch_size_t == 1:
        return x
    return rearrange(x, "b (c p r q) f h w -> b c (f p) (h q) (w r)", p=patch_size_t, q=patch_size_hw, r=patch_size_hw)


class PerChannelStatistics(nnx.Module):
    """Dataset statistics of the latent means: parameters `std-of-means`, `mean-of-means` (latent_channels,).

    They are torch buffers in ltx-core and ordinary entries of the checkpoint. Initialized to the
    identity (std 1, mean 0) as upstream ltx-core does (1.0.0 left them uninitialized).
    """

    def __init__(self, latent_channels: int, *, param_dtype: jnp.dtype = jnp.float32) -> None:
        setattr(self, STD_KEY, nnx.Param(jnp.ones((latent_channels,), param_dtype)))
        setattr(self, MEAN_KEY, nnx.Param(jnp.zeros((latent_channels,), param_dtype)))

    def _stats(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        std = getattr(self, STD_KEY)[...].astype(x.dtype).reshape(shape)
        return std, getattr(self, MEAN_KEY)[...].astype(x.dtype).reshape(shape)

    def un_normalize(self, x: jax.Array) -> jax.Array:
        """(B, C, F, H, W) normalized latent -> `x * std + mean`."""
        std, mean = self._stats(x)
        return x * std + mean

    def normalize(self, x: jax.Array) -> jax.Array:
        """(B, C, F, H, W) latent means -> `(x - mean) / std`."""
        std, mean = self._stats(x)
        return (x - mean) / std
