"""Multi-head attention with q/k RMSNorm, RoPE, perturbation blending and per-head gating.

Source: `ltx_core/model/transformer/attention.py`.

Every attention call goes through an `AttentionFn`, the one seam sequence parallelism uses: the
model asks `AttentionOps.for_module(name)` which function each attention module calls, so a
wrapper can swap the function of `attn1` or `video_to_audio_attn` without touching the model.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal, Protocol, get_args

import jax
import jax.numpy as jnp
from flax import nnx

# Private module: jax's own rule for which head dims cuDNN takes (compute capability) lives there.
from jax._src.cudnn import fused_attention_stablehlo as cudnn_fmha

from ltx_jax.model.normalization import RMSNorm, linear
from ltx_jax.model.rope import PositionalEmbedding, RopeType, apply_rotary_emb

logger = logging.getLogger(__name__)

AttentionBackend = Literal["auto", "xla", "cudnn"]
_CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)


class AttentionFn(Protocol):
    """`(B, Tq, H*D)` queries, `(B, Tk, H*D)` keys/values -> `(B, Tq, H*D)`.

    `mask` is an additive bias broadcastable to `(B, H, Tq, Tk)` (finite; 0 keeps a key), as
    ltx-core passes to SDPA. Scale is `1/sqrt(D)`. The backends here also take
    `key_value_seq_lengths` `(B,)` (attend to the first keys only), which sequence parallelism
    uses for its padded keys.
    """

    def __call__(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array: ...


def _split_heads(x: jax.Array, heads: int) -> jax.Array:
    return x.reshape(*x.shape[:2], heads, x.shape[-1] // heads)


def _merge_heads(x: jax.Array) -> jax.Array:
    return x.reshape(*x.shape[:2], -1)


def _as_bias4d(mask: jax.Array | None) -> jax.Array | None:
    """ltx-core accepts 2-D and 3-D masks and inserts batch/head axes in front, as SDPA broadcasts."""
    if mask is None:
        return None
    return mask.reshape((1,) * (4 - mask.ndim) + mask.shape)


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
    bias = _as_bias4d(mask)
    if key_value_seq_lengths is not None:
        bias = key_padding_bias(key_value_seq_lengths, k.shape[1], q.dtype, bias)
    out = jax.nn.dot_product_attention(
        _split_heads(q, heads), _split_heads(k, heads), _split_heads(v, heads), bias=bias, implementation="xla"
    )
    return _merge_heads(out)


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


def cudnn_supports(q: jax.Array, heads: int, mask: jax.Array | None) -> str | None:
    """None if cuDNN fused attention can run this call, else the reason it cannot."""
    reason = cudnn_kernel_unsupported(q.dtype, q.shape[-1] // heads)
    if reason is not None:
        return reason
    if mask is not None and (mask.ndim < 2 or mask.shape[-2] == 1 or mask.shape[-1] == 1):
        return f"it rejects broadcast masks such as shape {mask.shape} (give key lengths instead)"
    return None


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
    reason = cudnn_supports(q, heads, mask)
    if reason is not None:
        raise ValueError(f"attention_backend='cudnn' cannot run this attention call: {reason}. Use 'auto' or 'xla'.")
    out = jax.nn.dot_product_attention(
        _split_heads(q, heads),
        _split_heads(k, heads),
        _split_heads(v, heads),
        bias=_as_bias4d(mask),
        key_value_seq_lengths=key_value_seq_lengths,
        implementation="cudnn",
    )
    return _merge_heads(out)


def auto_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    heads: int,
    mask: jax.Array | None = None,
    key_value_seq_lengths: jax.Array | None = None,
) -> jax.Array:
    """cuDNN where `cudnn_supports` says it can run (GPU, bf16/fp16, no broadcast mask), XLA elsewhere.

    The choice depends only on the platform, dtype, head dim and mask shape, so it is fixed per
    compiled shape and the same on every device of a mesh.
    """
    fn = cudnn_attention if cudnn_supports(q, heads, mask) is None else xla_attention
    return fn(q, k, v, heads=heads, mask=mask, key_value_seq_lengths=key_value_seq_lengths)


_BACKENDS = {"auto": auto_attention, "xla": xla_attention, "cudnn": cudnn_attention}


def attention_backend(name: AttentionBackend) -> AttentionFn:
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


@dataclasses.dataclass(frozen=True)
class AttentionOps:
    """Which `AttentionFn` each attention module calls, keyed by ltx-core's module names.

    `default` serves every module without an entry in `overrides` (e.g. `{"attn1": ulysses}`).
    """

    default: AttentionFn
    overrides: tuple[tuple[str, AttentionFn], ...] = ()

    def for_module(self, name: str) -> AttentionFn:
        return dict(self.overrides).get(name, self.default)

    def with_overrides(self, **functions: AttentionFn) -> AttentionOps:
        return dataclasses.replace(self, overrides=tuple({**dict(self.overrides), **functions}.items()))


class Attention(nnx.Module):
    """`to_q/to_k/to_v` -> q/k RMSNorm (over all heads) -> RoPE -> attention -> gate -> `to_out.0`."""

    def __init__(
        self,
        query_dim: int,
        context_dim: int | None,
        heads: int,
        dim_head: int,
        *,
        norm_eps: float,
        rope_type: RopeType,
        apply_gated_attention: bool,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        inner_dim = heads * dim_head
        context_dim = query_dim if context_dim is None else context_dim
        self.heads = heads
        self.dim_head = dim_head
        self.rope_type = rope_type
        self.q_norm = RMSNorm(inner_dim, eps=norm_eps, param_dtype=param_dtype)
        self.k_norm = RMSNorm(inner_dim, eps=norm_eps, param_dtype=param_dtype)
        self.to_q = linear(query_dim, inner_dim, rngs=rngs, param_dtype=param_dtype)
        self.to_k = linear(context_dim, inner_dim, rngs=rngs, param_dtype=param_dtype)
        self.to_v = linear(context_dim, inner_dim, rngs=rngs, param_dtype=param_dtype)
        self.to_gate_logits = (
            linear(query_dim, heads, rngs=rngs, param_dtype=param_dtype) if apply_gated_attention else None
        )
        self.to_out = nnx.List([linear(inner_dim, query_dim, rngs=rngs, param_dtype=param_dtype)])

    def __call__(
        self,
        x: jax.Array,
        context: jax.Array | None = None,
        *,
        attention_fn: AttentionFn,
        mask: jax.Array | None = None,
        pe: PositionalEmbedding | None = None,
        k_pe: PositionalEmbedding | None = None,
        perturbation_mask: jax.Array | None = None,
        all_perturbed: bool = False,
    ) -> jax.Array:
        """`x` `(B, Tq, query_dim)`, `context` `(B, Tk, context_dim)` (defaults to `x`).

        `all_perturbed` (static) skips attention and passes `to_v(context)` through;
        `perturbation_mask` `(B, 1, 1)` blends `out * m + v * (1 - m)` per batch element.
        """
        context = x if context is None else context
        v = self.to_v(context)
        if all_perturbed:
            out = v
        else:
            q = self.q_norm(self.to_q(x))
            k = self.k_norm(self.to_k(context))
            if pe is not None:
                q = apply_rotary_emb(q, pe, self.rope_type)
                k = apply_rotary_emb(k, pe if k_pe is None else k_pe, self.rope_type)
            out = attention_fn(q, k, v, heads=self.heads, mask=mask)
            if perturbation_mask is not None:
                out = out * perturbation_mask + v * (1 - perturbation_mask)
        if self.to_gate_logits is not None:
            # 2*sigmoid so that zero logits leave the head unchanged.
            gates = 2.0 * jax.nn.sigmoid(self.to_gate_logits(x))
            out = (_split_heads(out, self.heads) * gates[..., None]).reshape(out.shape)
        return self.to_out[0](out)
