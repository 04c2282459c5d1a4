"""LTX-2.5's duration head: how long the prompt's shot should be, in seconds, from the text connectors' outputs.

Source: ltx-core 1.2.0 `duration_head/duration_head.py` (`DurationHead`, `AttentionPooler`) and
`model_configurator.py` (`DurationHeadConfigurator`, `DURATION_HEAD_KEY_OPS`). Each stream is projected to the
pooler's width and tagged with its modality embedding; the streams are concatenated, pooled by learned queries
through one multi-head attention (torch's `nn.MultiheadAttention`: no mask, since the connectors have already
replaced padding with registers), and an MLP with tanh-GELU gives the log-duration, returned as `exp`. Attribute
paths equal the file's keys below `duration_head.` (`attention_pooler.cross_attn.in_proj_weight`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import linear

DURATION_HEAD_PREFIX = "duration_head."


class MultiheadAttention(nnx.Module):
    """torch's `nn.MultiheadAttention` (batch first, no mask): the q, k, v projections packed in one
    `in_proj_weight` (3E, E) as torch stores it, then `out_proj`."""

    def __init__(self, dim: int, num_heads: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        if dim % num_heads:
            raise ValueError(f"the pooler's width {dim} must be a multiple of its {num_heads} heads.")
        self.num_heads = num_heads
        self.in_proj_weight = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (3 * dim, dim), param_dtype))
        self.in_proj_bias = nnx.Param(jnp.zeros((3 * dim,), param_dtype))
        self.out_proj = linear(dim, dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, queries: jax.Array, tokens: jax.Array) -> jax.Array:
        """queries (B, Q, E) over tokens (B, T, E) -> (B, Q, E)."""
        w_q, w_k, w_v = jnp.split(self.in_proj_weight[...], 3)
        b_q, b_k, b_v = jnp.split(self.in_proj_bias[...], 3)

        def heads(x: jax.Array, weight: jax.Array, bias: jax.Array) -> jax.Array:
            y = x @ weight.T + bias
            return y.reshape(*y.shape[:-1], self.num_heads, -1)

        q, k, v = heads(queries, w_q, b_q), heads(tokens, w_k, b_k), heads(tokens, w_v, b_v)
        out = jax.nn.dot_product_attention(q, k, v, implementation="xla")
        return self.out_proj(out.reshape(*queries.shape))


class AttentionPooler(nnx.Module):
    """`num_queries` learned tokens attending over the sequence: (B, T, E) -> (B, num_queries, E)."""

    def __init__(
        self, dim: int, num_queries: int, num_heads: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
    ) -> None:
        self.query_tokens = nnx.Param(0.02 * jax.random.normal(rngs.params(), (num_queries, dim), param_dtype))
        self.cross_attn = MultiheadAttention(dim, num_heads, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        queries = jnp.broadcast_to(self.query_tokens[...], (tokens.shape[0], *self.query_tokens.shape))
        return self.cross_attn(queries.astype(tokens.dtype), tokens)


class DurationHead(nnx.Module):
    """`(video tokens (B, Tv, Dv) or None, audio tokens (B, Ta, Da) or None)` -> seconds (B,)."""

    def __init__(
        self,
        *,
        video_cross_attention_dim: int = 4096,
        audio_cross_attention_dim: int = 2048,
        pooler_hidden_dim: int = 256,
        num_queries: int = 1,
        num_pooler_heads: int = 4,
        mlp_hidden: int = 256,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        kw = {"rngs": rngs, "param_dtype": param_dtype}
        self.video_input_proj = linear(video_cross_attention_dim, pooler_hidden_dim, **kw)
        self.video_modality_emb = nnx.Param(jnp.zeros((pooler_hidden_dim,), param_dtype))
        self.audio_input_proj = linear(audio_cross_attention_dim, pooler_hidden_dim, **kw)
        self.audio_modality_emb = nnx.Param(jnp.zeros((pooler_hidden_dim,), param_dtype))
        self.attention_pooler = AttentionPooler(pooler_hidden_dim, num_queries, num_pooler_heads, **kw)
        self.mlp_hidden = linear(pooler_hidden_dim * num_queries, mlp_hidden, **kw)
        self.mlp_out = linear(mlp_hidden, 1, **kw)

    def __call__(self, video_tokens: jax.Array | None = None, audio_tokens: jax.Array | None = None) -> jax.Array:
        if video_tokens is None and audio_tokens is None:
            raise ValueError("DurationHead needs video_tokens, audio_tokens or both (the connectors' outputs).")
        groups = []
        if video_tokens is not None:
            groups.append(self.video_input_proj(video_tokens) + self.video_modality_emb[...])
        if audio_tokens is not None:
            groups.append(self.audio_input_proj(audio_tokens) + self.audio_modality_emb[...])
        pooled = self.attention_pooler(jnp.concatenate(groups, axis=1))
        hidden = jax.nn.gelu(self.mlp_hidden(pooled.reshape(pooled.shape[0], -1)), approximate=True)
        return jnp.exp(self.mlp_out(hidden)[..., 0])


def duration_head_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> DurationHead:
    """`DurationHeadConfigurator.from_metadata`: the connectors' widths from `config.transformer`, the head's
    own sizes from `config.duration_head` (upstream's defaults where absent)."""
    transformer, head = config.get("transformer", {}), config.get("duration_head", {})
    return DurationHead(
        video_cross_attention_dim=transformer.get("cross_attention_dim", 4096),
        audio_cross_attention_dim=transformer.get("audio_cross_attention_dim", 2048),
        pooler_hidden_dim=head.get("pooler_hidden_dim", 256),
        num_queries=head.get("num_queries", 1),
        num_pooler_heads=head.get("num_pooler_heads", 4),
        mlp_hidden=head.get("mlp_hidden", 256),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def duration_head_state_dict(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """A file's `duration_head.*` tensors under the head's own keys (upstream's `DURATION_HEAD_KEY_OPS`)."""
    return {k.removeprefix(DURATION_HEAD_PREFIX): v for k, v in tensors.items() if k.startswith(DURATION_HEAD_PREFIX)}
