"""The local attention backends: plain attention for the DiT, and attention with its log-sum-exp for
the blocks of ring attention.

Plain (`attention_backend(name)`, `LTXModel(..., attention_backend=...)`): "xla" (`xla_attention`,
scores materialized, any dtype, any mask), "cudnn" (`cudnn_attention`, cuDNN fused attention;
raises where it cannot run) and "auto" (`auto_attention`: "cudnn" where `cudnn_attention_unsupported`
finds nothing against it, else "xla").

With log-sum-exp (`block_attention_backend(name)`, `SequenceParallel(..., ring_kernel=...)`): "xla"
(`attention_with_lse`), "cudnn" (`cudnn_attention_with_lse`, cuDNN flash attention with its softmax
statistics) and "auto" (`auto_attention_with_lse`, "cudnn" where `cudnn_block_unsupported` finds
nothing against it). A partial result over a key block is `(out, lse)` with `out = softmax(S) V`
and `lse = log sum_k exp(S[k])` (natural log, `S` the scaled scores plus bias); the merges live in
`ltx_jax.parallel.blockwise`.

Both "auto" rules depend only on the platform, dtype, head dim and mask shape, so the choice is
fixed per compiled shape and the same on every device of a mesh.
"""

from __future__ import annotations

import logging
from typing import Literal, Protocol, get_args

import jax
import jax.numpy as jnp

# Private module, for two things the public API lacks: jax's own rule for which head dims cuDNN
# takes (by compute capability), and cuDNN's float32 log-sum-exp (the public
# `jax.nn.dot_product_attention(..., return_residual=True)` rounds it to the activation dtype, bf16,
# which would perturb every merge weight of ring attention by ~0.4%).
from jax._src.cudnn import fused_attention_stablehlo as cudnn_fmha

logger = logging.getLogger(__name__)

AttentionBackend = Literal["auto", "xla", "cudnn"]
RingKernel = Literal["auto", "cudnn", "xla"]
_CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)


class AttentionFn(Protocol):
    """What the model's attention modules call: `(B, Tq, H*D)` queries, `(B, Tk, H*D)` keys/values
    -> `(B, Tq, H*D)`.

    `mask` is an additive bias broadcastable to `(B, H, Tq, Tk)` (finite; 0 keeps a key), as
    ltx-core passes to SDPA. Scale is `1/sqrt(D)`.
    """

    def __call__(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array: ...


class LocalAttentionFn(Protocol):
    """An `AttentionFn` that also takes `key_value_seq_lengths` `(B,)` int32 (attend to the first
    keys of each sample only): the local attention that sequence parallelism runs on each device,
    with its padded keys at the end of the gathered sequence."""

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        *,
        heads: int,
        mask: jax.Array | None = None,
        key_value_seq_lengths: jax.Array | None = None,
    ) -> jax.Array: ...


class BlockAttentionFn(Protocol):
    """`(B, Tq, H, D)` queries, `(B, Tk, H, D)` keys/values, an additive `bias` broadcastable to
    `(B, H, Tq, Tk)` (finite; the caller's mask), `key_lengths` `(B,)` int32 (only the first
    `key_lengths[b]` keys of the block are real, 0 for an all-padding block) -> `out (B, Tq, H, D)`
    (float32 or the input dtype), `lse (B, H, Tq)` float32. Scale `1/sqrt(D)`. A block whose keys
    are all masked has `lse = -inf`, `out = 0`."""

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        *,
        bias: jax.Array | None = None,
        key_lengths: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]: ...


def split_heads(x: jax.Array, heads: int) -> jax.Array:
    """`(..., H*D)` -> `(..., H, D)`."""
    return x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)


def merge_heads(x: jax.Array) -> jax.Array:
    """`(..., H, D)` -> `(..., H*D)`."""
    return x.reshape(*x.shape[:-2], -1)


def as_bias4d(mask: jax.Array | None) -> jax.Array | None:
    """A 2-D/3-D/4-D additive bias as `(B|1, H|1, Tq|1, Tk|1)`: ltx-core accepts 2-D and 3-D masks and
    inserts batch/head axes in front, as SDPA broadcasts them."""
    if mask is None:
        return None
    return mask.reshape((1,) * (4 - mask.ndim) + mask.shape)


def finite_or_zero(x: jax.Array) -> jax.Array:
    """A stabilizing shift: -inf (every key masked) becomes 0 so exp() gives 0, never NaN."""
    return jnp.where(jnp.isfinite(x), x, 0.0)


def key_padding_bias(
    key_value_seq_lengths: jax.Array, num_keys: int, dtype: jnp.dtype, bias: jax.Array | None = None
) -> jax.Array:
    """Adds key padding to an additive bias: keys at or past `key_value_seq_lengths[b]` get -inf.

    -inf, not the finite minimum the caller's masks use, so a padded key weighs exactly zero even
    in a row the caller masked completely (softmax then stays uniform over the real keys, as
    without padding). No row is all -inf: every sample has at least one real key. Without `bias`
    the result is `(B, 1, 1, num_keys)`, O(T).
    """
    valid = (jnp.arange(num_keys)[None, :] < key_value_seq_lengths[:, None])[:, None, None, :]
    return jnp.where(valid, jnp.zeros((), dtype) if bias is None else bias, -jnp.inf).astype(dtype)


def cudnn_kernel_unsupported(dtype: jnp.dtype, head_dim: int) -> str | None:
    """None if cuDNN's flash attention runs `dtype` and `head_dim` on this platform, else the reason.

    The checks every cuDNN attention call shares (the DiT's and the ring's block kernel), as jax's
    own `check_is_flash_attention`: a GPU, bf16/fp16, a head dim that is a multiple of 8 and at most
    256 from Hopper on, 128 before.
    """
    if jax.default_backend() != "gpu":
        return f"it needs a GPU and JAX's default backend is {jax.default_backend()!r}"
    if dtype not in _CUDNN_DTYPES:
        return f"it needs bfloat16 or float16 activations, got {dtype}"
    max_head_dim = 256 if cudnn_fmha.check_compute_capability("9.0") else 128
    if head_dim % 8 or head_dim > max_head_dim:
        return f"it needs a head dim that is a multiple of 8 and at most {max_head_dim} on this GPU, got {head_dim}"
    return None


def cudnn_attention_unsupported(q: jax.Array, heads: int, mask: jax.Array | None) -> str | None:
    """None if `cudnn_attention` can run this call (`q` `(B, Tq, H*D)`), else the reason it cannot."""
    reason = cudnn_kernel_unsupported(q.dtype, q.shape[-1] // heads)
    if reason is not None:
        return reason
    if mask is not None and (mask.ndim < 2 or mask.shape[-2] == 1 or mask.shape[-1] == 1):
        return f"it rejects broadcast masks such as shape {mask.shape} (give key lengths instead)"
    return None


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


def xla_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    heads: int,
    mask: jax.Array | None = None,
    key_value_seq_lengths: jax.Array | None = None,
) -> jax.Array:
    """Plain XLA attention (scores materialized), any dtype, any mask. Softmax in float32.

    `key_value_seq_lengths` `(B,)`: only the first keys of each sample are attended (key padding).
    """
    bias = as_bias4d(mask)
    if key_value_seq_lengths is not None:
        bias = key_padding_bias(key_value_seq_lengths, k.shape[1], q.dtype, bias)
    out = jax.nn.dot_product_attention(
        split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), bias=bias, implementation="xla"
    )
    return merge_heads(out)


def cudnn_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    heads: int,
    mask: jax.Array | None = None,
    key_value_seq_lengths: jax.Array | None = None,
) -> jax.Array:
    """cuDNN fused (flash) attention. Raises if this call cannot run on cuDNN; never falls back."""
    reason = cudnn_attention_unsupported(q, heads, mask)
    if reason is not None:
        raise ValueError(f"attention_backend='cudnn' cannot run this attention call: {reason}. Use 'auto' or 'xla'.")
    out = jax.nn.dot_product_attention(
        split_heads(q, heads),
        split_heads(k, heads),
        split_heads(v, heads),
        bias=as_bias4d(mask),
        key_value_seq_lengths=key_value_seq_lengths,
        implementation="cudnn",
    )
    return merge_heads(out)


def auto_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    heads: int,
    mask: jax.Array | None = None,
    key_value_seq_lengths: jax.Array | None = None,
) -> jax.Array:
    """`cudnn_attention` where `cudnn_attention_unsupported` finds nothing against it (GPU, bf16/fp16,
    head dim, no broadcast mask), `xla_attention` elsewhere."""
    fn = cudnn_attention if cudnn_attention_unsupported(q, heads, mask) is None else xla_attention
    return fn(q, k, v, heads=heads, mask=mask, key_value_seq_lengths=key_value_seq_lengths)


_BACKENDS: dict[str, LocalAttentionFn] = {"auto": auto_attention, "xla": xla_attention, "cudnn": cudnn_attention}


def attention_backend(name: AttentionBackend) -> LocalAttentionFn:
    """The attention function named `name`: "auto" (cuDNN on GPU where it applies, else XLA), "xla", "cudnn"."""
    if name not in _BACKENDS:
        raise ValueError(f"attention_backend must be one of {list(get_args(AttentionBackend))}, got {name!r}.")
    if name == "cudnn" and jax.default_backend() != "gpu":
        raise ValueError(
            f"attention_backend='cudnn' needs a GPU; JAX's default backend is {jax.default_backend()!r}. "
            "Use 'auto' or 'xla'."
        )
    logger.info("attention backend: %s", name)
    return _BACKENDS[name]


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
    shift = finite_or_zero(scores.max(axis=-1, keepdims=True))
    weights = jnp.exp(scores - shift)
    total = weights.sum(axis=-1, keepdims=True)  # (B, H, Tq, 1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v.astype(jnp.float32))
    out = out / jnp.moveaxis(jnp.where(total > 0, total, 1.0), 1, 2)
    return out, (shift + jnp.log(total))[..., 0]


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


_BLOCK_BACKENDS: dict[str, BlockAttentionFn] = {
    "auto": auto_attention_with_lse,
    "xla": attention_with_lse,
    "cudnn": cudnn_attention_with_lse,
}


def check_ring_kernel(name: str) -> None:
    """Raises `ValueError` for an unknown `ring_kernel`, or for "cudnn" without a GPU."""
    if name not in _BLOCK_BACKENDS:
        raise ValueError(f"ring_kernel must be one of {list(get_args(RingKernel))}, got {name!r}.")
    if name == "cudnn" and jax.default_backend() != "gpu":
        raise ValueError(
            f"ring_kernel='cudnn' needs a GPU; JAX's default backend is {jax.default_backend()!r}. "
            "Use ring_kernel='auto' or 'xla'."
        )


def block_attention_backend(name: RingKernel) -> BlockAttentionFn:
    """The per-block attention of the ring named `name` (checked by `check_ring_kernel`)."""
    check_ring_kernel(name)
    return _BLOCK_BACKENDS[name]
