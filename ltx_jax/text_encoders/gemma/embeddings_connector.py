"""The embeddings connector: learnable registers in place of padding, then a 1-D RoPE transformer.

Source: `ltx_core/text_encoders/gemma/embeddings_connector.py` (upstream main; see below for the
ltx-core 1.0.0 differences). Parameter paths equal the checkpoint keys after the prefix
`model.diffusion_model.{video,audio}_embeddings_connector.`: `learnable_registers`,
`transformer_1d_blocks.{i}.attn1.{to_q,to_k,to_v,q_norm,k_norm,to_out.0,to_gate_logits}`,
`transformer_1d_blocks.{i}.ff.net.{0.proj,2}`.

ltx-core 1.0.0 moved the valid tokens to the front inside the connector, which worked for batch
size 1 and left padding only (larger batches raise an IndexError there). Upstream moves them in
`EmbeddingsProcessor` for any batch and padding side, and the connector fills the padded slots
in place; we follow upstream. For batch 1 and left padding the two give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.config import RopeType
from ltx_jax.model.attention import Attention
from ltx_jax.model.attention_backends import AttentionFn, auto_attention
from ltx_jax.model.feed_forward import FeedForward
from ltx_jax.model.normalization import rms_norm
from ltx_jax.model.rope import PositionalEmbedding, precompute_freqs_cis

_NORM_EPS = 1e-6


class BasicTransformerBlock1D(nnx.Module):
    """`x += attn1(rms(x)); x += ff(rms(x))` (ltx-core's `_BasicTransformerBlock1D`)."""

    def __init__(
        self,
        dim: int,
        heads: int,
        dim_head: int,
        *,
        rope_type: RopeType,
        apply_gated_attention: bool,
        ff_bias: bool,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        self.attn1 = Attention(
            dim,
            None,
            heads,
            dim_head,
            norm_eps=_NORM_EPS,
            rope_type=rope_type,
            apply_gated_attention=apply_gated_attention,
            rngs=rngs,
            param_dtype=param_dtype,
        )
        self.ff = FeedForward(dim, dim, bias=ff_bias, rngs=rngs, param_dtype=param_dtype)

    def __call__(
        self, x: jax.Array, *, attention_fn: AttentionFn, mask: jax.Array | None, pe: PositionalEmbedding
    ) -> jax.Array:
        """x (B, S, dim), additive mask (B, 1, 1, S) or None -> (B, S, dim)."""
        x = self.attn1(rms_norm(x), attention_fn=attention_fn, mask=mask, pe=pe) + x
        return self.ff(rms_norm(x)) + x


class Embeddings1DConnector(nnx.Module):
    """Text features (B, S, D) -> (B, S, D) with D = `num_attention_heads * attention_head_dim`.

    Keyword arguments as ltx-core's (its unused `causal_temporal_positioning` left out), plus
    upstream's `ff_bias`. `rope_type` defaults to upstream's "split" (1.0.0: "interleaved").
    """

    def __init__(
        self,
        attention_head_dim: int = 128,
        num_attention_heads: int = 30,
        num_layers: int = 2,
        positional_embedding_theta: float = 10000.0,
        positional_embedding_max_pos: tuple[int, ...] | list[int] | None = None,
        num_learnable_registers: int | None = 128,
        rope_type: RopeType = "split",
        double_precision_rope: bool = False,
        apply_gated_attention: bool = False,
        ff_bias: bool = True,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if rope_type not in ("split", "interleaved"):
            raise ValueError(f"rope_type={rope_type!r}; use 'split' or 'interleaved'.")
        self.num_attention_heads = num_attention_heads
        self.inner_dim = num_attention_heads * attention_head_dim
        self.positional_embedding_theta = positional_embedding_theta
        self.positional_embedding_max_pos = tuple(positional_embedding_max_pos or (1,))
        self.rope_type, self.double_precision_rope = rope_type, double_precision_rope
        self.transformer_1d_blocks = nnx.List(
            [
                BasicTransformerBlock1D(
                    self.inner_dim,
                    num_attention_heads,
                    attention_head_dim,
                    rope_type=rope_type,
                    apply_gated_attention=apply_gated_attention,
                    ff_bias=ff_bias,
                    rngs=rngs,
                    param_dtype=param_dtype,
                )
                for _ in range(num_layers)
            ]
        )
        self.num_learnable_registers = num_learnable_registers
        if num_learnable_registers:
            shape = (num_learnable_registers, self.inner_dim)
            self.learnable_registers = nnx.Param(jax.random.uniform(rngs.params(), shape, param_dtype, -1.0, 1.0))

    def replace_padded_with_learnable_registers(
        self, hidden_states: jax.Array, additive_attention_mask: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """Padded tokens (mask < 0) become the registers tiled over S; the mask becomes all zeros.

        Expects right-padded input (valid tokens first), which `EmbeddingsProcessor` arranges.
        """
        seq_len = hidden_states.shape[1]
        registers = jnp.tile(self.learnable_registers[...], (seq_len // self.num_learnable_registers, 1))
        valid = (additive_attention_mask[:, 0, 0, :] >= 0)[..., None]
        hidden_states = jnp.where(valid, hidden_states, registers.astype(hidden_states.dtype)[None])
        return hidden_states, jnp.zeros_like(additive_attention_mask)

    def __call__(
        self,
        hidden_states: jax.Array,
        additive_attention_mask: jax.Array | None = None,
        *,
        attention_fn: AttentionFn = auto_attention,
    ) -> tuple[jax.Array, jax.Array | None]:
        """hidden_states (B, S, D), additive mask (B, 1, 1, S) (0 valid, -max padded) or None (all valid).

        Returns the connected features (B, S, D) and the mask after register replacement (zeros).
        With registers, S must be a multiple of `num_learnable_registers` (128: Gemma's 1024 tokens).
        """
        b, seq_len, dim = hidden_states.shape
        if dim != self.inner_dim:
            raise ValueError(f"hidden_states has width {dim}; this connector takes {self.inner_dim}.")
        if additive_attention_mask is not None and additive_attention_mask.shape != (b, 1, 1, seq_len):
            raise ValueError(
                f"additive_attention_mask has shape {tuple(additive_attention_mask.shape)}; expected "
                f"({b}, 1, 1, {seq_len}) (see convert_to_additive_mask)."
            )
        attention_mask = additive_attention_mask
        if self.num_learnable_registers:
            if seq_len % self.num_learnable_registers:
                raise ValueError(
                    f"sequence length {seq_len} must be a multiple of num_learnable_registers "
                    f"({self.num_learnable_registers}); pad the prompt tokens to such a length."
                )
            if additive_attention_mask is not None:
                hidden_states, additive_attention_mask = self.replace_padded_with_learnable_registers(
                    hidden_states, additive_attention_mask
                )
            # The mask is all zeros now: attending without one gives the same numbers.
            attention_mask = None
        positions = jnp.broadcast_to(jnp.arange(seq_len, dtype=jnp.float32), (b, 1, seq_len))
        pe = precompute_freqs_cis(
            positions,
            dim=self.inner_dim,
            out_dtype=hidden_states.dtype,
            theta=self.positional_embedding_theta,
            max_pos=self.positional_embedding_max_pos,
            use_middle_indices_grid=False,
            num_attention_heads=self.num_attention_heads,
            rope_type=self.rope_type,
            double_precision=self.double_precision_rope,
        )
        for block in self.transformer_1d_blocks:
            hidden_states = block(hidden_states, attention_fn=attention_fn, mask=attention_mask, pe=pe)
        return rms_norm(hidden_states, _NORM_EPS), additive_attention_mask


# ltx-core reads these from the checkpoint's transformer config but never passes them on: the
# connector always has 128 registers and theta 1e4. A checkpoint stating other values would be
# built wrongly, so it is refused.
_FIXED_VALUES: dict[str, Any] = {"connector_num_learnable_registers": 128, "connector_positional_embedding_theta": 1e4}


def connector_kwargs(transformer_config: Mapping[str, Any], *, audio: bool) -> dict[str, Any]:
    """`Embeddings1DConnector` keyword arguments from a checkpoint's `config["transformer"]`.

    The same keys and defaults as ltx-core's (Audio)Embeddings1DConnectorConfigurator, except the
    `rope_type` default: "split" (upstream) instead of 1.0.0's "interleaved". The audio connector
    falls back to the video connector's sizes. `connector_positional_embedding_max_pos` defaults
    to [1] in both versions; production checkpoints set [4096].
    """
    cfg = transformer_config
    for key, value in _FIXED_VALUES.items():
        if key in cfg and cfg[key] != value:
            raise ValueError(f"{key}={cfg[key]!r} is not supported: ltx-core always uses {value!r}.")
    sizes = {k: cfg.get(f"connector_{k}", d) for k, d in (("num_attention_heads", 30), ("attention_head_dim", 128))}
    sizes["num_layers"] = cfg.get("connector_num_layers", 2)
    if audio:
        sizes = {k: cfg.get(f"audio_connector_{k}", v) for k, v in sizes.items()}
    return {
        **sizes,
        "positional_embedding_max_pos": tuple(cfg.get("connector_positional_embedding_max_pos", [1])),
        "rope_type": cfg.get("rope_type", "split"),
        "double_precision_rope": cfg.get("frequencies_precision", False) == "float64",
        "apply_gated_attention": cfg.get("connector_apply_gated_attention", False),
        "ff_bias": cfg.get("connector_ff_bias", True),
    }


class Embeddings1DConnectorConfigurator:
    """`from_config({"transformer": {...}}, rngs=...)` -> the video connector."""

    audio = False

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, rngs: nnx.Rngs | None = None, param_dtype: jnp.dtype = jnp.float32
    ) -> Embeddings1DConnector:
        kwargs = connector_kwargs(config.get("transformer", {}), audio=cls.audio)
        return Embeddings1DConnector(**kwargs, rngs=rngs or nnx.Rngs(0), param_dtype=param_dtype)


class AudioEmbeddings1DConnectorConfigurator(Embeddings1DConnectorConfigurator):
    """`from_config({"transformer": {...}}, rngs=...)` -> the audio connector (`audio_connector_*` sizes)."""

    audio = True
