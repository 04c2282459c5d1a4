"""The online-softmax merges of partial attention results (ring attention's inner step).

A partial result over key block `K_i` is `(out_i, lse_i)` with `out_i = softmax(S_i) V_i` and
`lse_i = log sum_k exp(S_i[k])` (natural log, `S` the scaled scores plus bias); over `K_1 u K_2`,
`lse = logaddexp(lse_1, lse_2)` and `out = exp(lse_1 - lse) out_1 + exp(lse_2 - lse) out_2`. A block
whose keys are all masked has `lse = -inf`, `out = 0` and drops out of the merge.

The kernels that compute such partial results (`attention_with_lse`, `cudnn_attention_with_lse`,
`block_attention_backend`) are in `ltx_jax.model.attention_backends`.
"""

import jax
import jax.numpy as jnp
from jax import lax

from ltx_jax.model.attention_backends import finite_or_zero


def merge_partial(
    out_a: jax.Array, lse_a: jax.Array, out_b: jax.Array, lse_b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Two partial results over disjoint key sets -> the result over their union (float32).

    The weights are normalized by their sum, not by `exp(lse)`, so that two log-sum-exps that round
    to the same huge negative value still average instead of adding up.
    """
    shift = finite_or_zero(jnp.maximum(lse_a, lse_b))
    weight_a, weight_b = jnp.exp(lse_a - shift), jnp.exp(lse_b - shift)  # (B, H, Tq)
    total = weight_a + weight_b

    def scaled(out: jax.Array, weight: jax.Array) -> jax.Array:
        return out.astype(jnp.float32) * jnp.moveaxis(weight / jnp.where(total > 0, total, 1.0), 1, 2)[..., None]

    return scaled(out_a, weight_a) + scaled(out_b, weight_b), shift + jnp.log(total)


def merge_across(out: jax.Array, lse: jax.Array, axis_name: str) -> jax.Array:
    """Inside `shard_map`: each device's partial result over its keys -> the result over all keys.

    One max all-reduce of `lse` and one sum all-reduce of the weighted outputs with their weights
    (float32).
    """
    shift = finite_or_zero(lax.pmax(lse, axis_name))
    weight = jnp.moveaxis(jnp.exp(lse - shift), 1, 2)[..., None]  # (B, Tq, H, 1)
    summed = lax.psum(jnp.concatenate([out.astype(jnp.float32) * weight, weight], axis=-1), axis_name)
    return summed[..., :-1] / summed[..., -1:]
