"""Per-modality preprocessing: patchify projection, AdaLN inputs, RoPE tables, attention biases.

Source: `ltx_core/model/transformer/transformer_args.py`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.config import LTXConfig
from ltx_jax.model.adaln import AdaLayerNormSingle
from ltx_jax.model.modality import Modality
from ltx_jax.model.rope import PositionalEmbedding, precompute_freqs_cis
from ltx_jax.model.text_projection import PixArtAlphaTextProjection


@dataclasses.dataclass(frozen=True)
class TransformerArgs:
    """One modality's state between blocks. `x` changes block to block; the rest is fixed."""

    x: jax.Array  # (B, T, D)
    context: jax.Array  # (B, S, D)
    context_mask: jax.Array | None  # (B, 1, 1, S) additive bias
    timesteps: jax.Array  # (B, T or 1, coef*D) block modulation vector
    embedded_timestep: jax.Array  # (B, T or 1, D)
    positional_embeddings: PositionalEmbedding
    cross_positional_embeddings: PositionalEmbedding | None
    cross_scale_shift_timestep: jax.Array | None  # (B, T or 1, 4D)
    cross_gate_timestep: jax.Array | None  # (B, 1, D)
    enabled: bool
    prompt_timestep: jax.Array | None = None  # (B, 1, 2D)
    self_attention_mask: jax.Array | None = None  # (B, 1, T, T) additive bias


jax.tree_util.register_dataclass(
    TransformerArgs,
    data_fields=[f.name for f in dataclasses.fields(TransformerArgs) if f.name != "enabled"],
    meta_fields=["enabled"],
)


@dataclasses.dataclass(frozen=True)
class StreamModules:
    """The top-level modules that prepare one stream (video or audio), and its geometry."""

    patchify_proj: nnx.Linear
    adaln: AdaLayerNormSingle
    prompt_adaln: AdaLayerNormSingle | None
    caption_projection: PixArtAlphaTextProjection | None
    keyframes_abs_pos_embedding: nnx.Param | None
    cross_scale_shift_adaln: AdaLayerNormSingle | None
    cross_gate_adaln: AdaLayerNormSingle | None
    inner_dim: int
    num_attention_heads: int
    max_pos: tuple[int, ...]


def prepare_self_attention_mask(attention_mask: jax.Array | None, dtype: jnp.dtype) -> jax.Array | None:
    """`[0, 1]` strengths -> additive bias `(B, 1, Tq, Tk)`: `log(max(m, tiny))` where m > 0, else
    `finfo(dtype).min` (finite, so a fully masked row stays NaN-free)."""
    if attention_mask is None:
        return None
    finfo = jnp.finfo(dtype)
    mask = attention_mask if jnp.issubdtype(attention_mask.dtype, jnp.floating) else attention_mask.astype(jnp.float32)
    log_bias = jnp.log(jnp.maximum(mask, finfo.tiny)).astype(dtype)
    return jnp.where(mask > 0, log_bias, jnp.asarray(finfo.min, dtype))[:, None]


def prepare_context_mask(context_mask: jax.Array | None, dtype: jnp.dtype) -> jax.Array | None:
    """`(B, S)` bool/int text mask (1 = attend) -> additive bias `(B, 1, 1, S)`: `(m - 1) * finfo.max`."""
    if context_mask is None:
        return None
    if jnp.issubdtype(context_mask.dtype, jnp.floating):
        raise TypeError(
            f"context_mask must be boolean or integer (1 = attend, 0 = masked), got {context_mask.dtype}. "
            "Convert it with `mask > 0`."
        )
    bias = (context_mask.astype(jnp.int32) - 1).astype(dtype) * jnp.finfo(dtype).max
    return bias.reshape(context_mask.shape[0], 1, -1, context_mask.shape[-1])


def _embed_timestep(
    adaln: AdaLayerNormSingle, timestep: jax.Array, batch_size: int, multiplier: float, dtype: jnp.dtype
) -> tuple[jax.Array, jax.Array]:
    """Any `(B, ...)` timesteps -> (`(B, N, coef*D)`, `(B, N, D)`), N = timesteps per sample."""
    modulation, embedded = adaln((timestep * multiplier).reshape(-1), dtype)
    return modulation.reshape(batch_size, -1, modulation.shape[-1]), embedded.reshape(
        batch_size, -1, embedded.shape[-1]
    )


def _positional_embeddings(
    cfg: LTXConfig,
    positions: jax.Array,
    *,
    dim: int,
    heads: int,
    max_pos: tuple[int, ...],
    middle: bool,
    dtype: jnp.dtype,
) -> PositionalEmbedding:
    return precompute_freqs_cis(
        positions,
        dim=dim,
        out_dtype=dtype,
        theta=cfg.positional_embedding_theta,
        max_pos=max_pos,
        use_middle_indices_grid=middle,
        num_attention_heads=heads,
        rope_type=cfg.rope_type,
        double_precision=cfg.double_precision_rope,
    )


def prepare(cfg: LTXConfig, modules: StreamModules, modality: Modality, cross: Modality | None) -> TransformerArgs:
    """Builds the block inputs of `modality`; `cross` is the other modality in an audio-video model."""
    dtype = modality.latent.dtype
    x = modules.patchify_proj(modality.latent)
    batch_size = x.shape[0]
    if modules.keyframes_abs_pos_embedding is not None and modality.keyframes_mask is not None:
        marked = (modality.keyframes_mask > 0).astype(x.dtype)
        x = x + marked * modules.keyframes_abs_pos_embedding[...].astype(x.dtype)
    timesteps, embedded = _embed_timestep(
        modules.adaln, modality.timesteps, batch_size, cfg.timestep_scale_multiplier, dtype
    )
    prompt_timestep = None
    if modules.prompt_adaln is not None:
        prompt_timestep, _ = _embed_timestep(
            modules.prompt_adaln, modality.sigma, batch_size, cfg.timestep_scale_multiplier, dtype
        )
    context = modality.context
    if modules.caption_projection is not None:
        context = modules.caption_projection(context)
    args = TransformerArgs(
        x=x,
        context=context.reshape(batch_size, -1, x.shape[-1]),
        context_mask=prepare_context_mask(modality.context_mask, dtype),
        timesteps=timesteps,
        embedded_timestep=embedded,
        positional_embeddings=_positional_embeddings(
            cfg,
            modality.positions,
            dim=modules.inner_dim,
            heads=modules.num_attention_heads,
            max_pos=modules.max_pos,
            middle=cfg.use_middle_indices_grid,
            dtype=dtype,
        ),
        cross_positional_embeddings=None,
        cross_scale_shift_timestep=None,
        cross_gate_timestep=None,
        enabled=modality.enabled,
        prompt_timestep=prompt_timestep,
        self_attention_mask=prepare_self_attention_mask(modality.attention_mask, dtype),
    )
    if cross is None or modules.cross_scale_shift_adaln is None:
        return args
    return _add_cross_modal_inputs(cfg, modules, args, modality, cross)


def _add_cross_modal_inputs(
    cfg: LTXConfig, modules: StreamModules, args: TransformerArgs, modality: Modality, cross: Modality
) -> TransformerArgs:
    """RoPE over the time axis and AdaLN inputs for the audio-video cross-attentions."""
    dtype = modality.latent.dtype
    batch_size = args.x.shape[0]
    if cross.sigma.size > 1 and (cross.sigma.ndim != 1 or cross.sigma.shape[0] != batch_size):
        raise ValueError(
            f"The other modality's sigma must have shape ({batch_size},), got {cross.sigma.shape}: both "
            "modalities share the batch."
        )
    multiplier = cfg.timestep_scale_multiplier
    cross_sigma = cross.sigma.reshape(batch_size, 1)
    # Upstream modulates with this modality's own per-token timesteps; ltx-core 1.0.0 used the
    # other modality's sigma for the scale/shift as well as the gate.
    scale_shift_source = cross_sigma if cfg.av_ca_scale_shift_from_sigma else modality.timesteps
    scale_shift, _ = _embed_timestep(modules.cross_scale_shift_adaln, scale_shift_source, batch_size, multiplier, dtype)
    gate, _ = modules.cross_gate_adaln(
        (cross_sigma * multiplier).reshape(-1) * (cfg.av_ca_timestep_scale_multiplier / multiplier), dtype
    )
    cross_pe = _positional_embeddings(
        cfg,
        modality.positions[:, 0:1],
        dim=cfg.audio_cross_attention_dim,
        heads=modules.num_attention_heads,
        max_pos=(cfg.cross_pe_max_pos,),
        middle=True,
        dtype=dtype,
    )
    return dataclasses.replace(
        args,
        cross_positional_embeddings=cross_pe,
        cross_scale_shift_timestep=scale_shift,
        cross_gate_timestep=gate.reshape(batch_size, -1, gate.shape[-1]),
    )
