"""Per-channel latent statistics of the audio VAE, and `Buffer`, the checkpoint-stored constant.

Source: `ltx_core/model/audio_vae/ops.py`. Its `AudioProcessor` (waveform -> log-mel through
torchaudio) is ported in numpy, in `audio_processor.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


class Buffer(nnx.Param):
    """A torch buffer that the checkpoint stores (latent statistics, filters, STFT bases).

    A `Param` subclass so that `ltx_jax.load_state_dict` loads it under its ltx-core key; it is a
    constant of the model, not something to train (filter it out with `nnx.All(nnx.Param, nnx.Not(Buffer))`).
    """


class PerChannelStatistics(nnx.Module):
    """Dataset mean and std of the latent features (`mean-of-means`, `std-of-means`, shape (C,)).

    Upstream initializes them to the identity (std 1, mean 0); 1.0.0 left them uninitialized.
    """

    def __init__(self, latent_channels: int = 128, *, param_dtype: jnp.dtype = jnp.float32) -> None:
        setattr(self, "std-of-means", Buffer(jnp.ones((latent_channels,), param_dtype)))
        setattr(self, "mean-of-means", Buffer(jnp.zeros((latent_channels,), param_dtype)))

    def un_normalize(self, x: jax.Array) -> jax.Array:
        """x (..., C) -> x * std + mean (the decoder's input)."""
        std, mean = getattr(self, "std-of-means")[...], getattr(self, "mean-of-means")[...]
        return x * std.astype(x.dtype) + mean.astype(x.dtype)

    def normalize(self, x: jax.Array) -> jax.Array:
        """x (..., C) -> (x - mean) / std (the encoder's output)."""
        std, mean = getattr(self, "std-of-means")[...], getattr(self, "mean-of-means")[...]
        return (x - mean.astype(x.dtype)) / std.astype(x.dtype)
