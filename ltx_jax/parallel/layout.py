"""Token layout helpers shared by the sequence-parallel attention strategies.

Inside `shard_map` the padded video sequence of `T` tokens is split into contiguous equal blocks;
the pad tokens are the last `T - valid` of the whole sequence. The head layout helpers
(`split_heads`, `merge_heads`, `as_bias4d`) are in `ltx_jax.model.attention_backends`.
"""

import jax
import jax.numpy as jnp
from jax import lax


def key_lengths(valid_tokens: int, padded_tokens: int, batch_size: int) -> jax.Array | None:
    """`(B,)` key lengths that drop the pad keys of the whole padded sequence; None without padding."""
    if valid_tokens == padded_tokens:
        return None
    return jnp.full((batch_size,), valid_tokens, jnp.int32)


def bias_block(bias: jax.Array | None, start: jax.Array, size: int, axis: int) -> jax.Array | None:
    """`bias[..., start:start+size, ...]` along `axis` (-2 queries, -1 keys); a broadcast axis stays 1."""
    if bias is None or bias.shape[axis] == 1:
        return bias
    return lax.dynamic_slice_in_dim(bias, start, size, axis=axis)


def uniform_masked_rows(q: jax.Array, bias: jax.Array | None, valid_tokens: int) -> tuple[jax.Array, jax.Array | None]:
    """Rewrites the query rows the caller masked completely, for blockwise (log-sum-exp) attention.

    On one device such a row (every real key at the bias' finite minimum) attends uniformly to the
    real keys: `q.k` vanishes next to the minimum. Split into key blocks, each block's log-sum-exp
    rounds to that minimum and loses its key count, so the merge would weigh blocks, not keys.
    Zero query and zero bias give the same uniform row with exact log-sum-exps.

    `q` `(B, Tq, H, D)`, `bias` `(B|1, 1, Tq|1, T)` over all keys (pad keys at the end).
    """
    if bias is None or bias.shape[-1] == 1:
        return q, bias
    real = jnp.arange(bias.shape[-1]) < valid_tokens
    masked = jnp.all(jnp.where(real, bias <= jnp.finfo(bias.dtype).min, True), axis=-1, keepdims=True)
    q = jnp.where(jnp.moveaxis(masked, 1, 2), jnp.zeros((), q.dtype), q)  # (B|1, Tq|1, 1, 1)
    return q, jnp.where(masked, jnp.zeros((), bias.dtype), bias)
