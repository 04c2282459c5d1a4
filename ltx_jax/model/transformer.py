"""`BasicAVTransformerBlock`: one audio-video DiT block.

Source: `ltx_core/model/transformer/transformer.py`. Order per block: video self-attention, video
text cross-attention, the same for audio, audio-to-video and video-to-audio cross-attention (both
reading the state after text cross-attention), then the two feed-forwards.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.config import LTXConfig
from ltx_jax.guidance.perturbations import BlockSkips, PerturbationType
from ltx_jax.model.adaln import adaln_embedding_coefficient
from ltx_jax.model.attention import Attention, AttentionOps
from ltx_jax.model.feed_forward import FeedForward
from ltx_jax.model.normalization import rms_norm
from ltx_jax.model.transformer_args import TransformerArgs

AV_TABLE_ROWS = 5  # scale/shift for A2V, scale/shift for V2A, gate


def table(rows: int, dim: int, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> nnx.Param:
    """A learned modulation table `(rows, dim)`; random-init scale 1/sqrt(dim)."""
    return nnx.Param(jax.random.normal(rngs.params(), (rows, dim), param_dtype) / dim**0.5)


def ada_values(scale_shift_table: jax.Array, modulation: jax.Array, rows: slice) -> list[jax.Array]:
    """`table[rows] + modulation[:, :, rows]`, one `(B, T, D)` array per row."""
    b, t = modulation.shape[:2]
    per_row = modulation.reshape(b, t, scale_shift_table.shape[0], -1)[:, :, rows]
    values = scale_shift_table[rows][None, None].astype(modulation.dtype) + per_row
    return [values[:, :, i] for i in range(values.shape[2])]


class BasicAVTransformerBlock(nnx.Module):
    """One block. Unlike ltx-core's, it does not hold its index: the model hands it the perturbations
    resolved for its position (`BatchedPerturbationConfig.at_block`, or `masked_at_blocks` with the
    keep-masks as inputs), so blocks that skip the same kinds of attention are the same program
    (`ltx_jax.parallel.block_programs` compiles it once)."""

    def __init__(self, cfg: LTXConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.norm_eps = cfg.norm_eps
        self.cross_attention_adaln = cfg.cross_attention_adaln
        coef = adaln_embedding_coefficient(cfg.cross_attention_adaln)

        def attention(query_dim: int, context_dim: int | None, heads: int, dim_head: int) -> Attention:
            return Attention(
                query_dim,
                context_dim,
                heads,
                dim_head,
                norm_eps=cfg.norm_eps,
                rope_type=cfg.rope_type,
                apply_gated_attention=cfg.apply_gated_attention,
                rngs=rngs,
                param_dtype=param_dtype,
            )

        v_dim, a_dim = cfg.inner_dim, cfg.audio_inner_dim
        if cfg.has_video:
            self.attn1 = attention(v_dim, None, cfg.num_attention_heads, cfg.attention_head_dim)
            self.attn2 = attention(v_dim, cfg.cross_attention_dim, cfg.num_attention_heads, cfg.attention_head_dim)
            self.ff = FeedForward(v_dim, v_dim, bias=cfg.ff_bias, rngs=rngs, param_dtype=param_dtype)
            self.scale_shift_table = table(coef, v_dim, rngs, param_dtype)
            if cfg.cross_attention_adaln:
                self.prompt_scale_shift_table = table(2, v_dim, rngs, param_dtype)
        if cfg.has_audio:
            a_heads, a_head_dim = cfg.audio_num_attention_heads, cfg.audio_attention_head_dim
            self.audio_attn1 = attention(a_dim, None, a_heads, a_head_dim)
            self.audio_attn2 = attention(a_dim, cfg.audio_cross_attention_dim, a_heads, a_head_dim)
            self.audio_ff = FeedForward(a_dim, a_dim, bias=cfg.audio_ff_bias, rngs=rngs, param_dtype=param_dtype)
            self.audio_scale_shift_table = table(coef, a_dim, rngs, param_dtype)
            if cfg.cross_attention_adaln:
                self.audio_prompt_scale_shift_table = table(2, a_dim, rngs, param_dtype)
        if cfg.has_video and cfg.has_audio:
            heads, head_dim = cfg.audio_num_attention_heads, cfg.audio_attention_head_dim
            self.audio_to_video_attn = attention(v_dim, a_dim, heads, head_dim)  # Q: video, K/V: audio
            self.video_to_audio_attn = attention(a_dim, v_dim, heads, head_dim)  # Q: audio, K/V: video
            self.scale_shift_table_a2v_ca_audio = table(AV_TABLE_ROWS, a_dim, rngs, param_dtype)
            self.scale_shift_table_a2v_ca_video = table(AV_TABLE_ROWS, v_dim, rngs, param_dtype)

    def __call__(
        self,
        video: TransformerArgs | None,
        audio: TransformerArgs | None,
        perturbations: BlockSkips,
        attention_ops: AttentionOps,
    ) -> tuple[TransformerArgs | None, TransformerArgs | None]:
        vx = video.x if video is not None else None
        ax = audio.x if audio is not None else None
        run_vx = video is not None and video.enabled and vx.size > 0
        run_ax = audio is not None and audio.enabled and ax.size > 0
        run_a2v = run_vx and audio is not None and ax.size > 0
        run_v2a = run_ax and video is not None and vx.size > 0

        if run_vx:
            vx = self._self_attention(
                vx, video, "", PerturbationType.SKIP_VIDEO_SELF_ATTN, perturbations, attention_ops
            )
            vx = vx + self._text_cross_attention(vx, video, "", attention_ops)
        if run_ax:
            ax = self._self_attention(
                ax, audio, "audio_", PerturbationType.SKIP_AUDIO_SELF_ATTN, perturbations, attention_ops
            )
            ax = ax + self._text_cross_attention(ax, audio, "audio_", attention_ops)
        if run_a2v or run_v2a:
            vx, ax = self._audio_video_attention(vx, ax, video, audio, run_a2v, run_v2a, perturbations, attention_ops)
        if run_vx:
            vx = self._feed_forward(vx, video, self.ff, self.scale_shift_table)
        if run_ax:
            ax = self._feed_forward(ax, audio, self.audio_ff, self.audio_scale_shift_table)
        return (
            dataclasses.replace(video, x=vx) if video is not None else None,
            dataclasses.replace(audio, x=ax) if audio is not None else None,
        )

    def _self_attention(
        self,
        x: jax.Array,
        args: TransformerArgs,
        prefix: str,
        skip: PerturbationType,
        perturbations: BlockSkips,
        attention_ops: AttentionOps,
    ) -> jax.Array:
        name = f"{prefix}attn1"
        shift, scale, gate = ada_values(getattr(self, f"{prefix}scale_shift_table")[...], args.timesteps, slice(0, 3))
        normed = rms_norm(x, self.norm_eps) * (1 + scale) + shift
        all_perturbed = perturbations.all_in_batch(skip)
        partial = perturbations.any_in_batch(skip) and not all_perturbed
        mask = jnp.asarray(perturbations.mask(skip), x.dtype)[:, None, None] if partial else None
        attention = getattr(self, name)
        out = attention(
            normed,
            attention_fn=attention_ops.for_module(name, fp8=attention.fp8),
            mask=args.self_attention_mask,
            pe=args.positional_embeddings,
            perturbation_mask=mask,
            all_perturbed=all_perturbed,
        )
        return x + out * gate

    def _text_cross_attention(
        self, x: jax.Array, args: TransformerArgs, prefix: str, attention_ops: AttentionOps
    ) -> jax.Array:
        name = f"{prefix}attn2"
        attn = getattr(self, name)
        attention_fn = attention_ops.for_module(name)
        normed = rms_norm(x, self.norm_eps)
        if not self.cross_attention_adaln:
            return attn(normed, args.context, attention_fn=attention_fn, mask=args.context_mask)
        shift_q, scale_q, gate = ada_values(
            getattr(self, f"{prefix}scale_shift_table")[...], args.timesteps, slice(6, 9)
        )
        kv_modulation = getattr(self, f"{prefix}prompt_scale_shift_table")[...][None, None].astype(x.dtype)
        if args.prompt_timestep is not None:
            b, n = args.prompt_timestep.shape[:2]
            kv_modulation = kv_modulation + args.prompt_timestep.reshape(b, n, 2, -1)
        shift_kv, scale_kv = kv_modulation[:, :, 0], kv_modulation[:, :, 1]
        context = args.context * (1 + scale_kv) + shift_kv
        out = attn(normed * (1 + scale_q) + shift_q, context, attention_fn=attention_fn, mask=args.context_mask)
        return out * gate

    def _audio_video_attention(
        self,
        vx: jax.Array,
        ax: jax.Array,
        video: TransformerArgs,
        audio: TransformerArgs,
        run_a2v: bool,
        run_v2a: bool,
        perturbations: BlockSkips,
        attention_ops: AttentionOps,
    ) -> tuple[jax.Array, jax.Array]:
        # Both directions read the state after text cross-attention, before either update.
        vx_norm, ax_norm = rms_norm(vx, self.norm_eps), rms_norm(ax, self.norm_eps)
        video_table = self.scale_shift_table_a2v_ca_video[...]
        audio_table = self.scale_shift_table_a2v_ca_audio[...]
        directions = (
            # (run, skip type, query side, key side, module, rows, query-stream gate table)
            (
                run_a2v,
                PerturbationType.SKIP_A2V_CROSS_ATTN,
                (vx_norm, video, video_table),
                (ax_norm, audio, audio_table),
                "audio_to_video_attn",
                slice(0, 2),
            ),
            (
                run_v2a,
                PerturbationType.SKIP_V2A_CROSS_ATTN,
                (ax_norm, audio, audio_table),
                (vx_norm, video, video_table),
                "video_to_audio_attn",
                slice(2, 4),
            ),
        )
        updates = []
        for run, skip, (q_norm, q_args, q_table), (k_norm, k_args, k_table), name, rows in directions:
            if not run or perturbations.all_in_batch(skip):
                updates.append(None)
                continue
            scale_q, shift_q = ada_values(q_table[:4], q_args.cross_scale_shift_timestep, rows)
            (gate,) = ada_values(q_table[4:], q_args.cross_gate_timestep, slice(None))
            scale_k, shift_k = ada_values(k_table[:4], k_args.cross_scale_shift_timestep, rows)
            out = getattr(self, name)(
                q_norm * (1 + scale_q) + shift_q,
                k_norm * (1 + scale_k) + shift_k,
                attention_fn=attention_ops.for_module(name),
                pe=q_args.cross_positional_embeddings,
                k_pe=k_args.cross_positional_embeddings,
            )
            out = out * gate
            if perturbations.any_in_batch(skip):
                out = out * jnp.asarray(perturbations.mask(skip), out.dtype)[:, None, None]
            updates.append(out)
        a2v, v2a = updates
        return (vx if a2v is None else vx + a2v), (ax if v2a is None else ax + v2a)

    def _feed_forward(
        self, x: jax.Array, args: TransformerArgs, ff: FeedForward, scale_shift_table: nnx.Param
    ) -> jax.Array:
        shift, scale, gate = ada_values(scale_shift_table[...], args.timesteps, slice(3, 6))
        return x + ff(rms_norm(x, self.norm_eps) * (1 + scale) + shift) * gate
