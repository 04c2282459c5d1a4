"""Gemma 4's text decoder (the LTX-2.5 text encoder) in Flax NNX, returning every hidden state.

Source: `transformers/models/gemma4_unified/modeling_gemma4_unified.py` (transformers 5.14.1, which ltx-core
1.2.0 pins): `Gemma4UnifiedTextModel` and its parts, run by ltx-core's `LTXGemmaTextEncoder.encode` through
`Gemma4UnifiedModel` with `output_hidden_states=True`. Attribute paths equal the Hugging Face keys below
`model.language_model.` (`layers.5.self_attn.k_proj.weight`, `layers.0.layer_scalar`).

Against Gemma 3 (`gemma3_model.py`, whose embedding, RoPE application, masks and MLP this reuses): RMSNorm
multiplies by `weight` (not `1 + weight`); values get a scale-free RMSNorm (`v_norm`); the attention scale is
1; full layers have their own head width and, with `attention_k_eq_v`, take the key projection as values;
each layer's output is multiplied by a stored `layer_scalar`; multimodal placeholder ids embed as padding.
Numerics follow transformers: norms in float32, RoPE tables in float32 cast to the activation dtype, softmax
in float32; a query that sees no key (left padding) gets zeros, as torch SDPA returns.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import linear
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import LAYER_TYPES
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import (
    Gemma3MLP,
    Gemma3TextScaledWordEmbedding,
    all_hidden_states,
    apply_rope,
    attention_masks,
    rope_at,
)
from ltx_jax.text_encoders.gemma.encoders.gemma4_config import Gemma4ModelConfig


class Gemma4RMSNorm(nnx.Module):
    """`x * (mean(x^2) + eps)^-1/2`, times `weight` when `with_scale`, in float32; returned in the input dtype."""

    def __init__(self, dim: int, *, eps: float, with_scale: bool = True, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.eps = eps
        self.weight = nnx.Param(jnp.ones((dim,), param_dtype)) if with_scale else None

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        normed = xf * jnp.power(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps, -0.5)
        if self.weight is not None:
            normed = normed * self.weight[...].astype(jnp.float32)
        return normed.astype(x.dtype)


class Gemma4Attention(nnx.Module):
    """Grouped-query attention of one layer kind: q/k RMSNorm then RoPE, values RMSNorm-ed, scale 1."""

    def __init__(
        self, cfg: Gemma4ModelConfig, kind: str, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        kw = {"rngs": rngs, "param_dtype": param_dtype, "bias": False}
        self.num_heads, self.num_kv_heads = cfg.num_attention_heads, cfg.kv_heads(kind)
        self.head_dim = cfg.layer_head_dim(kind)
        self.q_proj = linear(cfg.hidden_size, self.num_heads * self.head_dim, **kw)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, **kw)
        self.v_proj = (
            None if cfg.values_are_keys(kind) else linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, **kw)
        )
        self.o_proj = linear(self.num_heads * self.head_dim, cfg.hidden_size, **kw)
        norm = {"eps": cfg.rms_norm_eps, "param_dtype": param_dtype}
        self.q_norm = Gemma4RMSNorm(self.head_dim, **norm)
        self.k_norm = Gemma4RMSNorm(self.head_dim, **norm)
        self.v_norm = Gemma4RMSNorm(self.head_dim, with_scale=False, **norm)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        """(B, S, D), RoPE tables (S, head_dim), boolean mask (B, 1, S, S) -> (B, S, D)."""
        b, s, _ = x.shape
        heads = (b, s, self.num_heads, self.head_dim)
        kv_heads = (b, s, self.num_kv_heads, self.head_dim)
        q = apply_rope(self.q_norm(self.q_proj(x).reshape(heads)), cos, sin)
        keys = self.k_proj(x).reshape(kv_heads)
        values = keys if self.v_proj is None else self.v_proj(x).reshape(kv_heads)
        k, v = apply_rope(self.k_norm(keys), cos, sin), self.v_norm(values)
        out = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=1.0, implementation="xla")
        # A query with no visible key (left padding) gets zeros, as SDPA gives, not the mean of all values.
        out = jnp.where(jnp.any(mask, axis=-1)[:, 0, :, None, None], out, jnp.zeros((), out.dtype))
        return self.o_proj(out.reshape(b, s, self.num_heads * self.head_dim))


class Gemma4DecoderLayer(nnx.Module):
    """Sandwich-normed attention and MLP, as Gemma 3's, then the output times the stored `layer_scalar`."""

    def __init__(
        self, cfg: Gemma4ModelConfig, kind: str, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        norm = {"eps": cfg.rms_norm_eps, "param_dtype": param_dtype}
        self.self_attn = Gemma4Attention(cfg, kind, rngs=rngs, param_dtype=param_dtype)
        self.mlp = Gemma3MLP(cfg, rngs=rngs, param_dtype=param_dtype)
        self.input_layernorm = Gemma4RMSNorm(cfg.hidden_size, **norm)
        self.post_attention_layernorm = Gemma4RMSNorm(cfg.hidden_size, **norm)
        self.pre_feedforward_layernorm = Gemma4RMSNorm(cfg.hidden_size, **norm)
        self.post_feedforward_layernorm = Gemma4RMSNorm(cfg.hidden_size, **norm)
        self.layer_scalar = nnx.Param(jnp.ones((1,), param_dtype))

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        return x * self.layer_scalar[...].astype(x.dtype)


class Gemma4TextModel(nnx.Module):
    """Token ids (B, S) and binary mask (B, S) -> the L + 1 hidden states (B, S, D) of transformers'
    `output_hidden_states=True`: the scaled embeddings, the outputs of layers 0..L-2, and the final norm of
    layer L-1's output. The same interface as `Gemma3TextModel` (`layer_inputs`, callable layers, `norm`), so
    `GemmaTextEncoder` runs either."""

    def __init__(self, cfg: Gemma4ModelConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.config = cfg
        self.embed_tokens = Gemma3TextScaledWordEmbedding(
            cfg.vocab_size, cfg.hidden_size, rngs=rngs, param_dtype=param_dtype
        )
        self.layers = nnx.List(
            [Gemma4DecoderLayer(cfg, kind, rngs=rngs, param_dtype=param_dtype) for kind in cfg.layer_types]
        )
        self.norm = Gemma4RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, param_dtype=param_dtype)

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array) -> tuple[jax.Array, ...]:
        return all_hidden_states(self, input_ids, attention_mask)

    def layer_inputs(
        self, input_ids: jax.Array, attention_mask: jax.Array
    ) -> tuple[jax.Array, dict[str, tuple[jax.Array, jax.Array]], dict[str, jax.Array]]:
        """The scaled embeddings, and per layer type its RoPE `(cos, sin)` tables (positions 0..S-1 whatever
        the padding) and attention mask: what every decoder layer takes besides `x`."""
        placeholder = jnp.isin(input_ids, jnp.asarray(self.config.multimodal_token_ids, input_ids.dtype))
        x = self.embed_tokens(jnp.where(placeholder, self.config.pad_token_id, input_ids))
        positions = jnp.arange(input_ids.shape[1])
        rope = {kind: rope_at(positions, self.config.rope_inv_freq(kind), x.dtype) for kind in LAYER_TYPES}
        return x, rope, attention_masks(attention_mask, self.config.sliding_window)
