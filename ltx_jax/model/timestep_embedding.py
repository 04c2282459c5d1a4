"""Sinusoidal timestep embedding and its MLP (PixArt-alpha style).

Source: `ltx_core/model/transformer/timestep_embedding.py`.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model.normalization import linear

TIMESTEP_CHANNELS = 256  # ltx-core: Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)


@functools.lru_cache(maxsize=8)
def timestep_frequencies(num_channels: int = TIMESTEP_CHANNELS, max_period: float = 10000.0) -> np.ndarray:
    """`exp(-ln(max_period) * i / half)` for i < half, as float32.

    The exponent is formed in float32 exactly as torch forms it; the exponential is evaluated in
    float64 and rounded once, so the table is the correctly rounded float32 value (torch's
    vectorized `exp` agrees to within 1 ulp). Timesteps reach 1000, so the frequencies are kept
    out of XLA's own `exp` approximation.
    """
    half = num_channels // 2
    exponent = np.float32(-math.log(max_period)) * np.arange(half, dtype=np.float32) / np.float32(half)
    return np.exp(exponent.astype(np.float64)).astype(np.float32)


def timestep_embedding(timesteps: jax.Array, num_channels: int = TIMESTEP_CHANNELS) -> jax.Array:
    """`(N,)` timesteps -> `(N, num_channels)` float32 `[cos, sin]` embedding."""
    args = timesteps.astype(jnp.float32)[:, None] * timestep_frequencies(num_channels)[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


class TimestepEmbedding(nnx.Module):
    """`linear_1 -> SiLU -> linear_2`."""

    def __init__(self, in_channels: int, time_embed_dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.linear_1 = linear(in_channels, time_embed_dim, rngs=rngs, param_dtype=param_dtype)
        self.linear_2 = linear(time_embed_dim, time_embed_dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, sample: jax.Array) -> jax.Array:
        return self.linear_2(jax.nn.silu(self.linear_1(sample)))


class PixArtAlphaCombinedTimestepSizeEmbeddings(nnx.Module):
    """Sinusoid (float32) cast to the hidden dtype, then the timestep MLP."""

    def __init__(self, embedding_dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.timestep_embedder = TimestepEmbedding(TIMESTEP_CHANNELS, embedding_dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, timestep: jax.Array, hidden_dtype: jnp.dtype) -> jax.Array:
        return self.timestep_embedder(timestep_embedding(timestep).astype(hidden_dtype))
