"""AdaLayerNormSingle: timestep -> modulation vector (adaLN-single, PixArt-alpha).

Source: `ltx_core/model/transformer/adaln.py`.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import linear
from ltx_jax.model.timestep_embedding import PixArtAlphaCombinedTimestepSizeEmbeddings

ADALN_NUM_BASE_PARAMS = 6  # shift/scale/gate for self-attention and for the feed-forward
ADALN_NUM_CROSS_ATTN_PARAMS = 3  # shift/scale/gate for the text cross-attention query


def adaln_embedding_coefficient(cross_attention_adaln: bool) -> int:
    """Rows of a block's `scale_shift_table`: 6, or 9 with cross-attention AdaLN."""
    return ADALN_NUM_BASE_PARAMS + (ADALN_NUM_CROSS_ATTN_PARAMS if cross_attention_adaln else 0)


class AdaLayerNormSingle(nnx.Module):
    """`(N,)` timesteps -> (`(N, coef*D)` modulation, `(N, D)` embedded timestep)."""

    def __init__(
        self, embedding_dim: int, embedding_coefficient: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype
    ) -> None:
        self.emb = PixArtAlphaCombinedTimestepSizeEmbeddings(embedding_dim, rngs=rngs, param_dtype=param_dtype)
        self.linear = linear(embedding_dim, embedding_coefficient * embedding_dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, timestep: jax.Array, hidden_dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
        embedded_timestep = self.emb(timestep, hidden_dtype)
        return self.linear(jax.nn.silu(embedded_timestep)), embedded_timestep
