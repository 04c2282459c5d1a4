"""Multi-head attention with q/k RMSNorm, RoPE, perturbation blending and per-head gating.

Source: `ltx_core/model/transformer/attention.py`.

Every attention call goes through an `AttentionFn`, the one seam sequence parallelism uses: the
model asks `AttentionOps.for_module(name)` which function each attention module calls, so a
wrapper can swap the function of `attn1` or `video_to_audio_attn` without touching the model. The
functions themselves (XLA, cuDNN) are in `ltx_jax.model.attention_backends`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.config import RopeType
from ltx_jax.model.attention_backends import AttentionFn, LocalAttentionFn, split_heads
from ltx_jax.model.fp8_attention import Fp8Attention
from ltx_jax.model.normalization import RMSNorm, linear
from ltx_jax.model.rope import PositionalEmbedding, apply_rotary_emb


@dataclasses.dataclass(frozen=True)
class AttentionOps:
    """Which `AttentionFn` each attention module calls, keyed by ltx-core's module names.

    `default` serves every module without an entry in `overrides` (e.g. `{"attn1": ulysses}`); it is
    a local backend, which sequence parallelism also calls with key lengths. A module that
    `quantize_fp8` marked (`Attention.fp8`) asks with `fp8=True`: its entry in `fp8_overrides`, else
    `Fp8Attention` around `default` where it has no entry in `overrides` either, else that entry (bf16:
    a wrapper that does not know fp8 keeps working).
    """

    default: LocalAttentionFn
    overrides: tuple[tuple[str, AttentionFn], ...] = ()
    fp8_overrides: tuple[tuple[str, AttentionFn], ...] = ()

    def for_module(self, name: str, *, fp8: bool = False) -> AttentionFn:
        overrides, fp8_overrides = dict(self.overrides), dict(self.fp8_overrides)
        if fp8 and name in fp8_overrides:
            return fp8_overrides[name]
        if fp8 and name not in overrides:
            return self.fp8_local()
        return overrides.get(name, self.default)

    def fp8_local(
        self, axis_name: str | tuple[str, ...] | None = None, valid_tokens: int | None = None
    ) -> LocalAttentionFn:
        """The local fp8 attention: fp8 where it can run, `default` elsewhere; `axis_name` and `valid_tokens`
        as `Fp8Attention`'s."""
        return Fp8Attention(fallback=self.default, axis_name=axis_name, valid_tokens=valid_tokens)

    def with_overrides(self, **functions: AttentionFn) -> AttentionOps:
        return dataclasses.replace(self, overrides=tuple({**dict(self.overrides), **functions}.items()))

    def with_fp8_overrides(self, **functions: AttentionFn) -> AttentionOps:
        return dataclasses.replace(self, fp8_overrides=tuple({**dict(self.fp8_overrides), **functions}.items()))


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
        self.fp8 = False  # set by `quantize_fp8`: the block asks its AttentionOps for the fp8 attention
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
            out = (split_heads(out, self.heads) * gates[..., None]).reshape(out.shape)
        return self.to_out[0](out)
