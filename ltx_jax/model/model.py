"""`LTXModel`: the LTX-2 audio-video diffusion transformer, returning velocities.

Source: `ltx_core/model/transformer/model.py`. Attribute paths equal ltx-core's state-dict keys
(`transformer_blocks[3].attn1.to_q`, `adaln_single.emb.timestep_embedder.linear_1`, ...).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.config import LTXConfig
from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.abstract import abstract_module, repeated
from ltx_jax.model.adaln import AdaLayerNormSingle, adaln_embedding_coefficient
from ltx_jax.model.attention import AttentionOps
from ltx_jax.model.attention_backends import AttentionBackend
from ltx_jax.model.attention_backends import attention_backend as resolve_attention_backend
from ltx_jax.model.modality import Modality
from ltx_jax.model.normalization import layer_norm, linear
from ltx_jax.model.text_projection import PixArtAlphaTextProjection
from ltx_jax.model.transformer import BasicAVTransformerBlock, table
from ltx_jax.model.transformer_args import StreamModules, TransformerArgs, prepare

AV_SCALE_SHIFT_VALUES = 4  # scale and shift for each A/V cross-attention direction
# XLA options for compiling a DiT forward (`jax.jit(..., compiler_options=DIT_COMPILER_OPTIONS)`;
# SequenceParallel uses them). With Triton's GEMM fusions off, every matrix product goes to cuBLAS
# and the elementwise work around them fuses differently: 1.5% / 0.9% less time per forward on an
# H200 at 6,144 / 24,576 video tokens, alternating with XLA's defaults in one process
# (benchmarks/results/2026-11-29/README.md, "Optimization pass"). The CPU compiler ignores GPU options.
DIT_COMPILER_OPTIONS: dict[str, bool] = {"xla_gpu_enable_triton_gemm": False}


class LTXModel(nnx.Module):
    """The DiT. `model(video, audio, perturbations)` -> `(video velocity, audio velocity)`.

    Args:
        cfg: the architecture.
        rngs: random init of the parameters (load real weights with `load_state_dict`).
        param_dtype: dtype of the parameters. Activations run in the dtype of the input latents.
        attention_backend: "auto" (cuDNN fused attention on GPU where dtype and mask allow, XLA
            otherwise), "xla" or "cudnn" (raises where cuDNN cannot run a call).
    """

    def __init__(
        self,
        cfg: LTXConfig,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
        attention_backend: AttentionBackend = "auto",
    ) -> None:
        self.cfg = cfg
        self.attention_ops = AttentionOps(default=resolve_attention_backend(attention_backend))
        coef = adaln_embedding_coefficient(cfg.cross_attention_adaln)

        def adaln(dim: int, coefficient: int) -> AdaLayerNormSingle:
            return AdaLayerNormSingle(dim, coefficient, rngs=rngs, param_dtype=param_dtype)

        def prompt_adaln(dim: int) -> AdaLayerNormSingle | None:
            return adaln(dim, 2) if cfg.cross_attention_adaln and cfg.use_prompt_adaln_single else None

        def caption_projection(dim: int) -> PixArtAlphaTextProjection | None:
            if cfg.caption_channels is None:
                return None
            return PixArtAlphaTextProjection(cfg.caption_channels, dim, rngs=rngs, param_dtype=param_dtype)

        v_dim, a_dim = cfg.inner_dim, cfg.audio_inner_dim
        if cfg.has_video:
            self.patchify_proj = linear(cfg.in_channels, v_dim, rngs=rngs, param_dtype=param_dtype)
            self.caption_projection = caption_projection(v_dim)
            self.adaln_single = adaln(v_dim, coef)
            self.prompt_adaln_single = prompt_adaln(v_dim)
            self.scale_shift_table = table(2, v_dim, rngs, param_dtype)
            self.proj_out = linear(v_dim, cfg.out_channels, rngs=rngs, param_dtype=param_dtype)
            self.keyframes_abs_pos_embedding = (
                nnx.Param(jnp.zeros((1, v_dim), param_dtype)) if cfg.use_keyframes_abs_pos_embedding else None
            )
        if cfg.has_audio:
            self.audio_patchify_proj = linear(cfg.audio_in_channels, a_dim, rngs=rngs, param_dtype=param_dtype)
            self.audio_caption_projection = caption_projection(a_dim)
            self.audio_adaln_single = adaln(a_dim, coef)
            self.audio_prompt_adaln_single = prompt_adaln(a_dim)
            self.audio_scale_shift_table = table(2, a_dim, rngs, param_dtype)
            self.audio_proj_out = linear(a_dim, cfg.audio_out_channels, rngs=rngs, param_dtype=param_dtype)
        if cfg.has_video and cfg.has_audio:
            self.av_ca_video_scale_shift_adaln_single = adaln(v_dim, AV_SCALE_SHIFT_VALUES)
            self.av_ca_audio_scale_shift_adaln_single = adaln(a_dim, AV_SCALE_SHIFT_VALUES)
            self.av_ca_a2v_gate_adaln_single = adaln(v_dim, 1)
            self.av_ca_v2a_gate_adaln_single = adaln(a_dim, 1)
        self.transformer_blocks = nnx.List(
            [BasicAVTransformerBlock(cfg, rngs=rngs, param_dtype=param_dtype) for _ in range(cfg.num_layers)]
        )

    @classmethod
    def abstract(
        cls, cfg: LTXConfig, param_dtype: jnp.dtype = jnp.float32, attention_backend: AttentionBackend = "auto"
    ) -> LTXModel:
        """`LTXModel(cfg)` with shape-only parameters (to load weights into), built in time independent
        of `num_layers`: one block is traced and copied (tracing all 48 in `nnx.eval_shape` takes minutes)."""
        one_block = dataclasses.replace(cfg, num_layers=min(cfg.num_layers, 1))
        model = abstract_module(
            lambda rngs: cls(one_block, rngs=rngs, param_dtype=param_dtype, attention_backend=attention_backend)
        )
        if cfg.num_layers > 1:
            model.transformer_blocks = repeated(model.transformer_blocks[0], cfg.num_layers)
        model.cfg = cfg
        return model

    def __call__(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
        *,
        attention_ops: AttentionOps | None = None,
    ) -> tuple[jax.Array | None, jax.Array | None]:
        """Velocities `(B, T_v, out_channels)` and `(B, T_a, audio_out_channels)`, None for an absent modality.

        `attention_ops` replaces the attention function per module (sequence parallelism uses it);
        by default every module uses the backend chosen at construction.
        """
        validate_inputs(self.cfg, video, audio, perturbations)
        return self.forward(video, audio, perturbations, attention_ops=attention_ops)

    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
        *,
        attention_ops: AttentionOps | None = None,
    ) -> tuple[jax.Array | None, jax.Array | None]:
        """`__call__` without its input checks, for wrappers that checked the caller's inputs
        themselves and then call the model on a part of them (SequenceParallel's local tokens)."""
        if perturbations is None:
            perturbations = BatchedPerturbationConfig.empty((video or audio).latent.shape[0])
        attention_ops = attention_ops or self.attention_ops
        video_args, audio_args = self.prepare_streams(video, audio)
        for idx, block in enumerate(self.transformer_blocks):
            video_args, audio_args = block(video_args, audio_args, perturbations.at_block(idx), attention_ops)
        return self.outputs(video_args, audio_args)

    def prepare_streams(
        self, video: Modality | None, audio: Modality | None
    ) -> tuple[TransformerArgs | None, TransformerArgs | None]:
        """The first part of `forward`: each modality's block inputs (patchified tokens, AdaLN and RoPE)."""
        video_args = prepare(self.cfg, self._stream("video"), video, audio) if video is not None else None
        audio_args = prepare(self.cfg, self._stream("audio"), audio, video) if audio is not None else None
        return video_args, audio_args

    def outputs(
        self, video_args: TransformerArgs | None, audio_args: TransformerArgs | None
    ) -> tuple[jax.Array | None, jax.Array | None]:
        """The last part of `forward`: the velocities from the last block's outputs."""
        vx = self._output(video_args, self.scale_shift_table, self.proj_out) if video_args is not None else None
        ax = (
            self._output(audio_args, self.audio_scale_shift_table, self.audio_proj_out)
            if audio_args is not None
            else None
        )
        return vx, ax

    def _stream(self, name: str) -> StreamModules:
        cfg = self.cfg
        prefix = "" if name == "video" else "audio_"
        av = cfg.has_video and cfg.has_audio
        cross = ("video", "a2v") if name == "video" else ("audio", "v2a")
        return StreamModules(
            patchify_proj=getattr(self, f"{prefix}patchify_proj"),
            adaln=getattr(self, f"{prefix}adaln_single"),
            prompt_adaln=getattr(self, f"{prefix}prompt_adaln_single"),
            caption_projection=getattr(self, f"{prefix}caption_projection"),
            keyframes_abs_pos_embedding=self.keyframes_abs_pos_embedding if name == "video" else None,
            cross_scale_shift_adaln=getattr(self, f"av_ca_{cross[0]}_scale_shift_adaln_single") if av else None,
            cross_gate_adaln=getattr(self, f"av_ca_{cross[1]}_gate_adaln_single") if av else None,
            inner_dim=cfg.inner_dim if name == "video" else cfg.audio_inner_dim,
            num_attention_heads=cfg.num_attention_heads if name == "video" else cfg.audio_num_attention_heads,
            max_pos=cfg.positional_embedding_max_pos if name == "video" else cfg.audio_positional_embedding_max_pos,
        )

    def _output(self, args: TransformerArgs, scale_shift_table: nnx.Param, proj_out: nnx.Linear) -> jax.Array:
        x = args.x
        values = scale_shift_table[...][None, None].astype(x.dtype) + args.embedded_timestep[:, :, None]
        shift, scale = values[:, :, 0], values[:, :, 1]
        return proj_out(layer_norm(x, self.cfg.norm_eps) * (1 + scale) + shift)


def to_denoised(latent: jax.Array, velocity: jax.Array, timesteps: jax.Array) -> jax.Array:
    """`x0 = latent - velocity * timesteps`, computed in float32, returned in `latent.dtype`.

    `timesteps` broadcasts against the latent: `(B, T, 1)` per token, `(B, 1, 1)` per sample, or a scalar sigma.
    """
    out = latent.astype(jnp.float32) - velocity.astype(jnp.float32) * jnp.asarray(timesteps, jnp.float32)
    return out.astype(latent.dtype)


def validate_inputs(
    cfg: LTXConfig, video: Modality | None, audio: Modality | None, perturbations: BatchedPerturbationConfig | None
) -> None:
    """Shape checks at the public boundary, before any tracing, with messages that say the fix."""
    if video is None and audio is None:
        raise ValueError("At least one of video or audio must be given.")
    for name, modality, enabled, channels, axes, context_dim in (
        (
            "video",
            video,
            cfg.has_video,
            cfg.in_channels,
            len(cfg.positional_embedding_max_pos),
            cfg.caption_channels or cfg.cross_attention_dim,
        ),
        (
            "audio",
            audio,
            cfg.has_audio,
            cfg.audio_in_channels,
            len(cfg.audio_positional_embedding_max_pos),
            cfg.caption_channels or cfg.audio_cross_attention_dim,
        ),
    ):
        if modality is None:
            continue
        if not enabled:
            raise ValueError(f"{name} was given but this is a model_type={cfg.model_type!r} model; pass {name}=None.")
        _check_modality(name, modality, channels, axes, context_dim)
    if video is not None and audio is not None and video.latent.shape[0] != audio.latent.shape[0]:
        raise ValueError(
            f"video and audio batch sizes differ ({video.latent.shape[0]} vs {audio.latent.shape[0]}); "
            "both modalities share the batch."
        )
    batch_size = (video or audio).latent.shape[0]
    if perturbations is not None and len(perturbations) != batch_size:
        raise ValueError(
            f"perturbations has {len(perturbations)} entries but the batch size is {batch_size}; "
            "give one PerturbationConfig per batch element."
        )


def _check_modality(name: str, m: Modality, channels: int, axes: int, context_dim: int) -> None:
    if m.latent.ndim != 3 or m.latent.shape[-1] != channels:
        raise ValueError(f"{name}.latent must be (B, T, {channels}) patchified tokens, got shape {m.latent.shape}.")
    b, t = m.latent.shape[:2]
    if m.sigma.shape != (b,):
        raise ValueError(f"{name}.sigma must have shape ({b},) (one noise level per sample), got {m.sigma.shape}.")
    if m.timesteps.shape[0] != b or m.timesteps.size not in (b, b * t):
        raise ValueError(
            f"{name}.timesteps must be ({b}, {t}, 1) per-token timesteps (or one per sample), got {m.timesteps.shape}."
        )
    if m.positions.shape[:3] != (b, axes, t):
        raise ValueError(
            f"{name}.positions must be ({b}, {axes}, {t}, 2) [start, end) bounds, got {m.positions.shape}."
        )
    if m.context.ndim != 3 or m.context.shape[0] != b or m.context.shape[-1] != context_dim:
        raise ValueError(
            f"{name}.context must be ({b}, S, {context_dim}) text embeddings, got shape {m.context.shape}."
        )
    if m.attention_mask is not None and (m.attention_mask.ndim != 3 or m.attention_mask.shape[-1] != t):
        raise ValueError(
            f"{name}.attention_mask must be ({b}, {t}, {t}) (or broadcast (1, 1, {t}) / ({b}, 1, {t})), "
            f"got {m.attention_mask.shape}."
        )
