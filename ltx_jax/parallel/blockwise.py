"""Attention of a query block over one key block, returning the log-sum-exp, and the online-softmax
merges of such partial results (ring attention's inner step).

A partial result over key block `K_i` is `(out_i, lse_i)` with `out_i = softmax(S_i) V_i` and
`lse_i = log sum_k exp(S_i[k])`; over `K_1 u K_2`, `lse = logaddexp(lse_1, lse_2)` and
`out = exp(lse_1 - lse) out_1 + exp(lse_2 - lse) out_2`. A block whose keys are all masked (-inf)
has `lse = -inf`, `out = 0` and drops out of the merge.
"""

from typing import Protocol

import jax
import jax.numpy as jnp
from jax import lax


class BlockAttentionFn(Protocol):
    """`(B, Tq, H, D)` queries, `(B, Tk, H, D)` keys/values, an additive `bias` broadcastable to
    `(B, H, Tq, Tk)` (-inf removes a key) -> `out (B, Tq, H, D)` float32, `lse (B, H, Tq)` float32.
    Scale `1/sqrt(D)`."""

    def __call__(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, bias: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array]: ...


def _finite_or_zero(x: jax.Array) -> jax.Array:
    """A stabilizing shift: -inf (every key masked) becomes 0 so exp() gives 0, never NaN."""
    return jnp.where(jnp.isfinite(x), x, 0.0)


def attention_with_lse(
    q: jax.Array, k: jax.Array, v: jax.Array, *, bias: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """XLA attention with scores materialized, float32 softmax and accumulation; see `BlockAttentionFn`."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) / jnp.sqrt(
        jnp.float32(q.shape[-1])
    )
    if bias is not None:
        scores = scores + bias.astype(jnp.float32)
    shift = _finite_or_zero(scores.max(axis=-1, keepdims=True))
    weights = jnp.exp(scores - shift)
    total = weights.sum(axis=-1, keepdims=True)  # (B, H, Tq, 1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v.astype(jnp.float32))
    out = out / jnp.moveaxis(jnp.where(total > 0, total, 1.0), 1, 2)
    return out, (shift + jnp.log(total))[..., 0]


def merge_partial(
    out_a: jax.Array, lse_a: jax.Array, out_b: jax.Array, lse_b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Two partial results over disjoint key sets -> the result over their union.

    The weights are normalized by their sum, not by `exp(lse)`, so that two log-sum-exps that round
    to the same huge negative value still average instead of adding up.
    """
    shift = _finite_or_zero(jnp.maximum(lse_a, lse_b))
    weight_a, weight_b = jnp.exp(lse_a - shift), jnp.exp(lse_b - shift)  # (B, H, Tq)
    total = weight_a + weight_b

    def scaled(out: jax.Array, weight: jax.Array) -> jax.Array:
        return out * jnp.moveaxis(weight / jnp.where(total > 0, total, 1.0), 1, 2)[..., None]

    return scaled(out_a, weight_a) + scaled(out_b, weight_b), shift + jnp.log(total)


def merge_across(out: jax.Array, lse: jax.Array, axis_name: str) -> jax.Array:
    """Inside `shard_map`: each device's partial result over its keys -> the result over all keys.

    One max all-reduce of `lse` and one sum all-reduce of the weighted outputs with their weights.
    """
    shift = _finite_or_zero(lax.pmax(lse, axis_name))
    weight = jnp.moveaxis(jnp.exp(lse - shift), 1, 2)[..., None]  # (B, Tq, H, 1)
    summed = lax.psum(jnp.concatenate([out * weight, weight], axis=-1), axis_name)
    return summed[..., :-1] / summed[..., -1:]
