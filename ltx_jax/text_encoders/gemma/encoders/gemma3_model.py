"""Gemma 3's text decoder in Flax NNX, returning every hidden state.

Source: `transformers/models/gemma3/modeling_gemma3.py` (transformers 5.x): `Gemma3TextModel` and
its parts, which ltx-core runs through `Gemma3ForConditionalGeneration.model` with
`output_hidden_states=True`. Attribute paths equal the Hugging Face state-dict keys below
`model.language_model.` (`layers.3.self_attn.q_proj.weight`), so `ltx_jax.load_state_dict` loads
them (`encoder_configurator.gemma_text_state_dict` renames a checkpoint's keys).

Numerics follow transformers: RMSNorm in float32 scaled by `1 + weight`, embeddings scaled by
`sqrt(hidden_size)` cast to the weight dtype, RoPE tables in float32 cast to the activation dtype,
softmax in float32. Positions are 0..S-1 whatever the padding (transformers' default when no
`position_ids` are given, as in ltx-core). A padded query of a left-padded prompt sees no key;
its attention output is zero, as torch SDPA (transformers' default attention) returns.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model.normalization import linear
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import Gemma3ModelConfig


class Gemma3RMSNorm(nnx.Module):
    """`x / rms(x) * (1 + weight)` in float32, returned in the input dtype; `weight` starts at zero."""

    def __init__(self, dim: int, *, eps: float, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.eps = eps
        self.weight = nnx.Param(jnp.zeros((dim,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        return (normed * (1.0 + self.weight[...].astype(jnp.float32))).astype(x.dtype)


class Gemma3TextScaledWordEmbedding(nnx.Module):
    """Token ids (B, S) -> embeddings (B, S, D) times `sqrt(D)` rounded to the weight dtype (62.0 in bf16)."""

    def __init__(self, vocab_size: int, dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.weight = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (vocab_size, dim), param_dtype))
        self.embed_scale = math.sqrt(dim)

    def __call__(self, input_ids: jax.Array) -> jax.Array:
        weight = self.weight[...]
        return jnp.take(weight, input_ids, axis=0) * jnp.asarray(self.embed_scale, weight.dtype)

    def attend(self, x: jax.Array) -> jax.Array:
        """(..., D) -> logits (..., vocab): the tied LM head, `x @ weight.T` in the weight dtype."""
        weight = self.weight[...]
        return jnp.einsum("...d,vd->...v", x.astype(weight.dtype), weight)


def rope_inv_freq(head_dim: int, base: float, scaling_factor: float = 1.0) -> np.ndarray:
    """(head_dim / 2,) float32 inverse frequencies `1 / base^(2i / head_dim) / scaling_factor`."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    return (np.float32(1.0) / np.power(np.float32(base), exponents)) / np.float32(scaling_factor)


def rope_at(positions: jax.Array, inv_freq: np.ndarray, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
    """cos, sin (S, head_dim) for the (S,) integer `positions`, computed in float32, cast to `dtype`."""
    freqs = positions.astype(jnp.float32)[:, None] * jnp.asarray(inv_freq)[None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb).astype(dtype), jnp.sin(emb).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """(B, S, H, D) rotated by the half-split RoPE (`rotate_half`) with (S, D) tables."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def attention_masks(attention_mask: jax.Array, sliding_window: int) -> dict[str, jax.Array]:
    """Binary (B, S) token mask -> boolean (B, 1, S, S) masks per layer type: causal, key not padded,
    and for sliding layers `query - key < sliding_window` (transformers' sliding-window causal mask)."""
    seq = attention_mask.shape[-1]
    q_idx, kv_idx = jnp.arange(seq)[:, None], jnp.arange(seq)[None, :]
    causal = (kv_idx <= q_idx)[None, None]
    keys = attention_mask.astype(bool)[:, None, None, :]
    full = causal & keys
    return {"full_attention": full, "sliding_attention": full & (q_idx - kv_idx < sliding_window)[None, None]}


class KVCache(NamedTuple):
    """One layer's keys and values, (B, T, kv_heads, head_dim) each; slot t holds position t."""

    keys: jax.Array
    values: jax.Array


class Gemma3MLP(nnx.Module):
    """GeGLU: `down(gelu_tanh(gate(x)) * up(x))`, no biases."""

    def __init__(self, cfg: Gemma3ModelConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        kw = {"rngs": rngs, "param_dtype": param_dtype, "bias": False}
        self.gate_proj = linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.up_proj = linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.down_proj = linear(cfg.intermediate_size, cfg.hidden_size, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.gelu(self.gate_proj(x), approximate=True) * self.up_proj(x))


class Gemma3Attention(nnx.Module):
    """Grouped-query attention with q/k RMSNorm before RoPE, scaled by `query_pre_attn_scalar^-1/2`."""

    def __init__(self, cfg: Gemma3ModelConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        kw = {"rngs": rngs, "param_dtype": param_dtype, "bias": False}
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.scale = cfg.query_pre_attn_scalar**-0.5
        self.q_proj = linear(cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim, **kw)
        self.k_proj = linear(cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim, **kw)
        self.v_proj = linear(cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim, **kw)
        self.o_proj = linear(cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size, **kw)
        self.q_norm = Gemma3RMSNorm(cfg.head_dim, eps=cfg.rms_norm_eps, param_dtype=param_dtype)
        self.k_norm = Gemma3RMSNorm(cfg.head_dim, eps=cfg.rms_norm_eps, param_dtype=param_dtype)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        """(B, S, D), RoPE tables (S, head_dim), boolean mask (B, 1, S, S) -> (B, S, D)."""
        return self.attend(*self.project(x, cos, sin), mask)

    def project(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(B, S, D) -> q (B, S, heads, head_dim) and k, v (B, S, kv_heads, head_dim), normed and rotated."""
        b, s, _ = x.shape
        q = self.q_norm(self.q_proj(x).reshape(b, s, self.num_heads, self.head_dim))
        k = self.k_norm(self.k_proj(x).reshape(b, s, self.num_kv_heads, self.head_dim))
        v = self.v_proj(x).reshape(b, s, self.num_kv_heads, self.head_dim)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def attend(self, q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
        """q (B, S, heads, head_dim) over k, v (B, T, kv_heads, head_dim) where the boolean mask
        (B, 1, S, T) allows -> (B, S, D)."""
        b, s = q.shape[:2]
        out = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=self.scale, implementation="xla")
        # A query with no visible key (left padding) gets zeros, as SDPA gives, not the mean of all values.
        sees_a_key = jnp.any(mask, axis=-1)[:, 0, :, None, None]
        out = jnp.where(sees_a_key, out, jnp.zeros((), out.dtype))
        return self.o_proj(out.reshape(b, s, self.num_heads * self.head_dim))


class Gemma3DecoderLayer(nnx.Module):
    """Sandwich-normed block: `x + post_attn_norm(attn(input_norm(x)))`, then the same around the MLP."""

    def __init__(self, cfg: Gemma3ModelConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        norm = {"eps": cfg.rms_norm_eps, "param_dtype": param_dtype}
        self.self_attn = Gemma3Attention(cfg, rngs=rngs, param_dtype=param_dtype)
        self.mlp = Gemma3MLP(cfg, rngs=rngs, param_dtype=param_dtype)
        self.input_layernorm = Gemma3RMSNorm(cfg.hidden_size, **norm)
        self.post_attention_layernorm = Gemma3RMSNorm(cfg.hidden_size, **norm)
        self.pre_feedforward_layernorm = Gemma3RMSNorm(cfg.hidden_size, **norm)
        self.post_feedforward_layernorm = Gemma3RMSNorm(cfg.hidden_size, **norm)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array) -> jax.Array:
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))

    def cached(
        self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array, cache: KVCache, write_at: jax.Array
    ) -> tuple[jax.Array, KVCache]:
        """The layer on new tokens x (B, S, D) whose keys and values are written into `cache` at slots
        `write_at`..`write_at + S - 1`; queries attend over the whole cache where `mask` (B, 1, S, T) allows."""
        q, k, v = self.self_attn.project(self.input_layernorm(x), cos, sin)
        cache = KVCache(
            jax.lax.dynamic_update_slice_in_dim(cache.keys, k.astype(cache.keys.dtype), write_at, axis=1),
            jax.lax.dynamic_update_slice_in_dim(cache.values, v.astype(cache.values.dtype), write_at, axis=1),
        )
        x = x + self.post_attention_layernorm(self.self_attn.attend(q, cache.keys, cache.values, mask))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x))), cache


class Gemma3TextModel(nnx.Module):
    """Token ids (B, S) and binary mask (B, S) -> the L + 1 hidden states (B, S, D) of transformers'
    `output_hidden_states=True`: the scaled embeddings, the outputs of layers 0..L-2, and the final
    norm of layer L-1's output (the un-normed last layer output is not among them)."""

    def __init__(self, cfg: Gemma3ModelConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.config = cfg
        self.embed_tokens = Gemma3TextScaledWordEmbedding(
            cfg.vocab_size, cfg.hidden_size, rngs=rngs, param_dtype=param_dtype
        )
        self.layers = nnx.List(
            [Gemma3DecoderLayer(cfg, rngs=rngs, param_dtype=param_dtype) for _ in range(cfg.num_hidden_layers)]
        )
        self.norm = Gemma3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, param_dtype=param_dtype)

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array) -> tuple[jax.Array, ...]:
        return all_hidden_states(self, input_ids, attention_mask)

    def layer_inputs(
        self, input_ids: jax.Array, attention_mask: jax.Array
    ) -> tuple[jax.Array, dict[str, tuple[jax.Array, jax.Array]], dict[str, jax.Array]]:
        """The scaled embeddings, and per layer type ("sliding_attention", "full_attention") its
        RoPE `(cos, sin)` tables and attention mask: what every decoder layer takes besides `x`."""
        x = self.embed_tokens(input_ids)
        rope = rope_tables(self.config, jnp.arange(input_ids.shape[1]), x.dtype)
        return x, rope, attention_masks(attention_mask, self.config.sliding_window)


def all_hidden_states(model: nnx.Module, input_ids: jax.Array, attention_mask: jax.Array) -> tuple[jax.Array, ...]:
    """The L + 1 hidden states of a Gemma text model (Gemma 3 or 4: `layer_inputs`, callable `layers` of
    `config.layer_types`, `norm`), the last one normed, as `Gemma3TextModel.__call__` describes."""
    if input_ids.ndim != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must both "
            "be (B, S); tokenize a list of prompts to get them."
        )
    x, rope, masks = model.layer_inputs(input_ids, attention_mask)
    hidden_states = [x]
    for layer, kind in zip(model.layers, model.config.layer_types, strict=True):
        x = layer(x, *rope[kind], masks[kind])
        hidden_states.append(x)
    hidden_states[-1] = model.norm(x)
    return tuple(hidden_states)


def rope_tables(
    cfg: Gemma3ModelConfig, positions: jax.Array, dtype: jnp.dtype
) -> dict[str, tuple[jax.Array, jax.Array]]:
    """Per layer type, the RoPE `(cos, sin)` (S, head_dim) of the (S,) `positions`: local layers
    rotate with `rope_local_base_freq`, global ones with `rope_theta` and the linear scaling."""
    inv_freq = {
        "sliding_attention": rope_inv_freq(cfg.head_dim, cfg.rope_local_base_freq),
        "full_attention": rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling_factor),
    }
    return {kind: rope_at(positions, freqs, dtype) for kind, freqs in inv_freq.items()}


def split_layers(model: Gemma3TextModel) -> tuple[tuple, list[tuple]]:
    """`(graphdef, state)` of the model without its layers, and of each layer: jitted programs take
    one layer at a time (the arrays are shared with `model`, not copied)."""
    outer = nnx.merge(*nnx.split(model))  # new modules on the same arrays
    layers = [nnx.split(layer) for layer in outer.layers]
    outer.layers = nnx.List([])
    return nnx.split(outer), layers
