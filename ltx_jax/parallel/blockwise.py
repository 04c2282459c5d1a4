"""Attention of a query block over one key block, returning the log-sum-exp, and the online-softmax
merges of such partial results (ring attention's inner step).

A partial result over key block `K_i` is `(out_i, lse_i)` with `out_i = softmax(S_i) V_i` and
`lse_i = log sum_k exp(S_i[k])` (natural log, `S` the scaled scores plus bias); over `K_1 u K_2`,
`lse = logaddexp(lse_1, lse_2)` and `out = exp(lse_1 - lse) out_1 + exp(lse_2 - lse) out_2`. A block
whose keys are all masked has `lse = -inf`, `out = 0` and drops out of the merge.

Kernels (`RingKernel`): "xla" (`attention_with_lse`, scores materialized, any dtype), "cudnn"
(`cudnn_attention_with_lse`, cuDNN flash attention with its softmax statistics, bf16/fp16 on GPU;
raises where it cannot run) and "auto" (the default: "cudnn" where `cudnn_block_unsupported` finds
nothing against it, else "xla"; the same rule as the DiT's `attention_backend="auto"`, fixed per
compiled shape and dtype).
"""

from typing import Literal, Protocol, get_args

import jax
import jax.numpy as jnp
from jax import lax

# Private module: the public `jax.nn.dot_product_attention(..., return_residual=True)` rounds the
# cuDNN log-sum-exp to the activation dtype (bf16), which would perturb every merge weight by ~0.4%.
from jax._src.cudnn import fused_attention_stablehlo as cudnn_fmha

from ltx_jax.model.attention import cudnn_kernel_unsupported
from ltx_jax.parallel.layout import as_bias4d

RingKernel = Literal["auto", "cudnn", "xla"]


class BlockAttentionFn(Protocol):
    """`(B, Tq, H, D)` queries, `(B, Tk, H, D)` keys/values, an additive `bias` broadcastable to
    `(B, H, Tq, Tk)` (finite; the caller's mask), `key_lengths` `(B,)` int32 (only the first
    `key_lengths[b]` keys of the block are real, 0 for an all-padding block) -> `out (B, Tq, H, D)`
    (float32 or the input dtype), `lse (B, H, Tq)` float32. Scale `1/sqrt(D)`."""

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        *,
        bias: jax.Array | None = None,
        key_lengths: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]: ...


def _finite_or_zero(x: jax.Array) -> jax.Array:
    """A stabilizing shift: -inf (every key masked) becomes 0 so exp() gives 0, never NaN."""
    return jnp.where(jnp.isfinite(x), x, 0.0)


def attention_with_lse(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    bias: jax.Array | None = None,
    key_lengths: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """XLA attention with scores materialized, float32 softmax and accumulation; see `BlockAttentionFn`.

    Pad keys get a -inf bias (`(B, 1, 1, Tk)`, O(Tk)), so they weigh exactly zero even in rows the
    caller masked completely; a bias may also hold -inf itself.
    """
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) / jnp.sqrt(
        jnp.float32(q.shape[-1])
    )
    if bias is not None:
        scores = scores + bias.astype(jnp.float32)
    if key_lengths is not None:
        real = (jnp.arange(k.shape[1]) < key_lengths[:, None])[:, None, None, :]
        scores = jnp.where(real, scores, -jnp.inf)
    shift = _finite_or_zero(scores.max(axis=-1, keepdims=True))
    weights = jnp.exp(scores - shift)
    total = weights.sum(axis=-1, keepdims=True)  # (B, H, Tq, 1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v.astype(jnp.float32))
    out = out / jnp.moveaxis(jnp.where(total > 0, total, 1.0), 1, 2)
    return out, (shift + jnp.log(total))[..., 0]


def cudnn_block_unsupported(q: jax.Array, bias: jax.Array | None, k: jax.Array | None = None) -> str | None:
    """None if `cudnn_attention_with_lse` can run this call (`bias` 4-D or None), else the reason.

    The checks of every cuDNN call (`cudnn_kernel_unsupported`), plus those jax makes for attention
    with statistics (its training path): bias heads, and with a bias even query and key lengths.
    """
    reason = cudnn_kernel_unsupported(q.dtype, q.shape[-1])
    if reason is not None:
        return reason
    if bias is not None and bias.shape[1] not in (1, q.shape[2]):
        return f"its bias takes 1 or {q.shape[2]} heads, got a bias of shape {bias.shape}"
    lengths = (q.shape[1], q.shape[1] if k is None else k.shape[1])
    if bias is not None and any(t % 2 for t in lengths):
        return f"with a bias it needs even query and key lengths, got {lengths[0]} and {lengths[1]}"
    return None


def cudnn_attention_with_lse(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    bias: jax.Array | None = None,
    key_lengths: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """cuDNN flash attention with its softmax statistics as the log-sum-exp; see `BlockAttentionFn`.

    `out` comes back in the input dtype. Pad keys are cuDNN's padding mask (`kv_seqlen`); a bias is
    broadcast to `(B|1, H|1, Tq, Tk)` (cuDNN broadcasts batch and heads only) and floored at jax's
    large negative number for cuDNN masks, since cuDNN computes NaN from two scores near `finfo.min`
    (a row whose keys in this block are all masked). cuDNN is never given an empty block: a block
    with `key_lengths == 0` runs on one key and its result is replaced by `lse = -inf`, `out = 0`.
    Raises `ValueError` where cuDNN cannot run the call (`cudnn_block_unsupported`); never falls back.
    """
    bias = as_bias4d(bias)
    reason = cudnn_block_unsupported(q, bias, k)
    if reason is not None:
        raise ValueError(
            f"ring_kernel='cudnn' cannot run this attention block: {reason}. Use ring_kernel='auto' or 'xla'."
        )
    batch, tq, _, head_dim = q.shape
    tk = k.shape[1]
    padding = {}
    if key_lengths is not None:
        padding = {
            "q_seqlen": jnp.full((batch,), tq, jnp.int32),
            "kv_seqlen": jnp.clip(key_lengths, 1, tk).astype(jnp.int32),
            "mask_type": cudnn_fmha.MaskType.PADDING,
        }
    if bias is not None:
        floor = cudnn_fmha.get_large_negative_number(q.dtype)
        bias = jnp.maximum(jnp.broadcast_to(bias, (*bias.shape[:2], tq, tk)).astype(q.dtype), floor)
    out, lse = cudnn_fmha.dot_product_attention(
        q, k, v, bias=bias, scale=float(head_dim) ** -0.5, qkv_layout="BTNH", return_residual=True, **padding
    )  # lse: (B, H, Tq) float32 whatever the layout
    if key_lengths is not None:
        empty = key_lengths <= 0
        out = jnp.where(empty[:, None, None, None], jnp.zeros((), out.dtype), out)
        lse = jnp.where(empty[:, None, None], -jnp.inf, lse)
    return out, lse


def auto_attention_with_lse(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    bias: jax.Array | None = None,
    key_lengths: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """`cudnn_attention_with_lse` where cuDNN can run this block (GPU, bf16/fp16, head dim, bias
    heads), `attention_with_lse` elsewhere, e.g. float32 models; see `BlockAttentionFn`."""
    fn = attention_with_lse if cudnn_block_unsupported(q, as_bias4d(bias), k) else cudnn_attention_with_lse
    return fn(q, k, v, bias=bias, key_lengths=key_lengths)


_KERNELS: dict[str, BlockAttentionFn] = {
    "auto": auto_attention_with_lse,
    "xla": attention_with_lse,
    "cudnn": cudnn_attention_with_lse,
}


def check_ring_kernel(name: str) -> None:
    """Raises `ValueError` for an unknown kernel, or for "cudnn" without a GPU."""
    if name not in _KERNELS:
        raise ValueError(f"ring_kernel must be one of {list(get_args(RingKernel))}, got {name!r}.")
    if name == "cudnn" and jax.default_backend() != "gpu":
        raise ValueError(
            f"ring_kernel='cudnn' needs a GPU; JAX's default backend is {jax.default_backend()!r}. "
            "Use ring_kernel='auto' or 'xla'."
        )


def block_kernel(name: RingKernel) -> BlockAttentionFn:
    """The per-block attention of the ring named `name` (checked by `check_ring_kernel`)."""
    check_ring_kernel(name)
    return _KERNELS[name]


def merge_partial(
    out_a: jax.Array, lse_a: jax.Array, out_b: jax.Array, lse_b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Two partial results over disjoint key sets -> the result over their union (float32).

    The weights are normalized by their sum, not by `exp(lse)`, so that two log-sum-exps that round
    to the same huge negative value still average instead of adding up.
    """
    shift = _finite_or_zero(jnp.maximum(lse_a, lse_b))
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
    shift = _finite_or_zero(lax.pmax(lse, axis_name))
    weight = jnp.moveaxis(jnp.exp(lse - shift), 1, 2)[..., None]  # (B, Tq, H, 1)
    summed = lax.psum(jnp.concatenate([out.astype(jnp.float32) * weight, weight], axis=-1), axis_name)
    return summed[..., :-1] / summed[..., -1:]
