"""Caption projection of the 19B DiT: `Linear -> GELU(tanh) -> Linear` on the text context.

Source: `ltx_core/model/transformer/text_projection.py`. On 2.3+ the text encoder projects the
context and the DiT has no caption projection.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import linear


class PixArtAlphaTextProjection(nnx.Module):
    def __init__(self, in_features: int, hidden_size: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.linear_1 = linear(in_features, hidden_size, rngs=rngs, param_dtype=param_dtype)
        self.linear_2 = linear(hidden_size, hidden_size, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, caption: jax.Array) -> jax.Array:
        return self.linear_2(jax.nn.gelu(self.linear_1(caption), approximate=True))
