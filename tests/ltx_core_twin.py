"""The PyTorch twin of a test model: ltx-core's `LTXModel` built from an `LTXConfig`, random weights
that make every branch matter, matching inputs for both frameworks, and the comparison metric."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import torch
from flax import nnx
from ltx_core.guidance import perturbations as torch_perturbations
from ltx_core.model.transformer.attention import AttentionFunction
from ltx_core.model.transformer.modality import Modality as TorchModality
from ltx_core.model.transformer.model import LTXModel as TorchLTXModel
from ltx_core.model.transformer.model import LTXModelType
from ltx_core.model.transformer.rope import LTXRopeType
from ltx_core.model.transformer.text_projection import PixArtAlphaTextProjection

import ltx_jax
from ltx_jax.guidance.perturbations import BatchedPerturbationConfig

VIDEO_FPS = 24.0
AUDIO_SECONDS_PER_MEL_FRAME = 160 / 16000
_MODEL_TYPES = {"video": LTXModelType.VideoOnly, "audio": LTXModelType.AudioOnly, "av": LTXModelType.AudioVideo}


def relative_error(ours: np.ndarray | jnp.ndarray, reference: torch.Tensor | np.ndarray) -> float:
    """`max|ours - reference| / max|reference|`, in float64."""
    ref = reference.detach().float().numpy() if isinstance(reference, torch.Tensor) else np.asarray(reference)
    ours = np.asarray(ours, np.float64)
    return float(np.abs(ours - ref).max() / np.abs(ref).max())


def torch_model(cfg: ltx_jax.LTXConfig, seed: int = 0) -> TorchLTXModel:
    """ltx-core 1.0.0's LTXModel with `cfg`'s architecture and random weights (float32, eval mode).

    1.0.0 has no `ff_bias` / `use_prompt_adaln_single` / keyframe keywords: tests of those emulate
    them on this model (see test_model_parity.py).
    """

    def caption_projection(dim: int) -> PixArtAlphaTextProjection | None:
        return None if cfg.caption_channels is None else PixArtAlphaTextProjection(cfg.caption_channels, dim)

    model = TorchLTXModel(
        model_type=_MODEL_TYPES[cfg.model_type],
        num_attention_heads=cfg.num_attention_heads,
        attention_head_dim=cfg.attention_head_dim,
        in_channels=cfg.in_channels,
        out_channels=cfg.out_channels,
        num_layers=cfg.num_layers,
        cross_attention_dim=cfg.cross_attention_dim,
        norm_eps=cfg.norm_eps,
        attention_type=AttentionFunction.PYTORCH,
        positional_embedding_theta=cfg.positional_embedding_theta,
        positional_embedding_max_pos=list(cfg.positional_embedding_max_pos),
        timestep_scale_multiplier=cfg.timestep_scale_multiplier,
        use_middle_indices_grid=cfg.use_middle_indices_grid,
        audio_num_attention_heads=cfg.audio_num_attention_heads,
        audio_attention_head_dim=cfg.audio_attention_head_dim,
        audio_in_channels=cfg.audio_in_channels,
        audio_out_channels=cfg.audio_out_channels,
        audio_cross_attention_dim=cfg.audio_cross_attention_dim,
        audio_positional_embedding_max_pos=list(cfg.audio_positional_embedding_max_pos),
        av_ca_timestep_scale_multiplier=cfg.av_ca_timestep_scale_multiplier,
        rope_type=LTXRopeType(cfg.rope_type),
        double_precision_rope=cfg.double_precision_rope,
        apply_gated_attention=cfg.apply_gated_attention,
        caption_projection=caption_projection(cfg.inner_dim) if cfg.has_video else None,
        audio_caption_projection=caption_projection(cfg.audio_inner_dim) if cfg.has_audio else None,
        cross_attention_adaln=cfg.cross_attention_adaln,
    )
    randomize(model, seed)
    return model.eval()


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Weights with unit-scale activations and strong modulation, so that every branch (gates,
    AdaLN rows, norms, biases) moves the output well above the float32 tolerance."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * noise)
            elif "table" in name:
                param.copy_(0.5 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(noise / param.shape[-1] ** 0.5)


def jax_model(
    cfg: ltx_jax.LTXConfig, reference: torch.nn.Module, param_dtype: jnp.dtype = jnp.float32
) -> ltx_jax.LTXModel:
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), param_dtype=param_dtype, attention_backend="xla")
    return ltx_jax.load_state_dict(model, reference.state_dict())


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Numpy inputs for one forward, convertible to either framework's `Modality`."""

    latent: np.ndarray
    sigma: np.ndarray
    timesteps: np.ndarray
    positions: np.ndarray
    context: np.ndarray
    enabled: bool = True
    context_mask: np.ndarray | None = None
    attention_mask: np.ndarray | None = None
    keyframes_mask: np.ndarray | None = None  # ltx-core 1.0.0 has no keyframe embedding: JAX only

    def to_torch(self) -> TorchModality:
        def tensor(a: np.ndarray | None) -> torch.Tensor | None:
            return None if a is None else torch.from_numpy(np.ascontiguousarray(a))

        return TorchModality(
            latent=tensor(self.latent),
            sigma=tensor(self.sigma),
            timesteps=tensor(self.timesteps),
            positions=tensor(self.positions),
            context=tensor(self.context),
            enabled=self.enabled,
            context_mask=tensor(self.context_mask),
            attention_mask=tensor(self.attention_mask),
        )

    def to_jax(self, dtype: jnp.dtype = jnp.float32) -> ltx_jax.Modality:
        def array(a: np.ndarray | None, cast: bool = True) -> jnp.ndarray | None:
            return None if a is None else jnp.asarray(a, dtype if cast and a.dtype == np.float32 else None)

        return ltx_jax.Modality(
            latent=array(self.latent),
            sigma=array(self.sigma, cast=False),
            timesteps=array(self.timesteps, cast=False),
            positions=array(self.positions, cast=False),
            context=array(self.context),
            enabled=self.enabled,
            context_mask=array(self.context_mask),
            attention_mask=array(self.attention_mask, cast=False),
            keyframes_mask=array(self.keyframes_mask, cast=False),
        )


def video_positions(batch: int, tokens: int, width: int = 5) -> np.ndarray:
    """`(B, 3, T, 2)` [start, end) pixel bounds of a (frames, width, width) latent grid, as the
    pipelines build them: 32 px cells, 8-frame steps with the causal first frame, time in seconds."""
    frames = -(-tokens // (width * width))
    f, h, w = (
        g.reshape(-1)[:tokens]
        for g in np.meshgrid(np.arange(frames), np.arange(width), np.arange(width), indexing="ij")
    )
    t_start, t_end = np.maximum(f * 8 + 1 - 8, 0), np.maximum((f + 1) * 8 + 1 - 8, 0)
    bounds = np.stack(
        [
            np.stack([t_start / VIDEO_FPS, t_end / VIDEO_FPS], -1),
            np.stack([h * 32, (h + 1) * 32], -1),
            np.stack([w * 32, (w + 1) * 32], -1),
        ]
    ).astype(np.float32)
    return np.broadcast_to(bounds, (batch, *bounds.shape)).copy()


def audio_positions(batch: int, tokens: int) -> np.ndarray:
    """`(B, 1, T, 2)` [start, end) seconds: latent i covers mel frames [max(4i-3, 0), 4i+1)."""
    i = np.arange(tokens)
    bounds = np.stack([np.maximum(4 * i - 3, 0), 4 * i + 1], -1)[None] * AUDIO_SECONDS_PER_MEL_FRAME
    return np.broadcast_to(bounds.astype(np.float32), (batch, 1, tokens, 2)).copy()


def make_inputs(
    rng: np.random.Generator,
    batch: int,
    tokens: int,
    channels: int,
    context_dim: int,
    positions: np.ndarray,
    sigma: np.ndarray | None = None,
    context_tokens: int = 7,
) -> Inputs:
    """Random latents and context; per-token timesteps `denoise_mask * sigma` with some tokens
    conditioned (mask 0) and some partly denoised."""
    sigma = rng.uniform(0.2, 1.0, batch).astype(np.float32) if sigma is None else sigma
    denoise_mask = rng.choice(np.array([0.0, 0.5, 1.0, 1.0], np.float32), size=(batch, tokens, 1))
    return Inputs(
        latent=rng.standard_normal((batch, tokens, channels), np.float32),
        sigma=sigma,
        timesteps=(denoise_mask * sigma[:, None, None]).astype(np.float32),
        positions=positions,
        context=rng.standard_normal((batch, context_tokens, context_dim), np.float32),
    )


def default_inputs(
    cfg: ltx_jax.LTXConfig, *, batch: int = 1, video_tokens: int = 50, audio_tokens: int = 13, seed: int = 0
) -> tuple[Inputs | None, Inputs | None]:
    rng = np.random.default_rng(seed)
    video = audio = None
    if cfg.has_video:
        video = make_inputs(
            rng,
            batch,
            video_tokens,
            cfg.in_channels,
            cfg.caption_channels or cfg.cross_attention_dim,
            video_positions(batch, video_tokens),
        )
    if cfg.has_audio:
        audio = make_inputs(
            rng,
            batch,
            audio_tokens,
            cfg.audio_in_channels,
            cfg.caption_channels or cfg.audio_cross_attention_dim,
            audio_positions(batch, audio_tokens),
        )
    return video, audio


def to_torch_perturbations(batched: BatchedPerturbationConfig) -> torch_perturbations.BatchedPerturbationConfig:
    return torch_perturbations.BatchedPerturbationConfig(
        [
            torch_perturbations.PerturbationConfig(
                [
                    torch_perturbations.Perturbation(
                        torch_perturbations.PerturbationType(p.type.value), None if p.blocks is None else list(p.blocks)
                    )
                    for p in config.perturbations
                ]
            )
            for config in batched.perturbations
        ]
    )


def run_torch(
    model: TorchLTXModel,
    video: Inputs | None,
    audio: Inputs | None,
    perturbations: BatchedPerturbationConfig | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    batch = (video or audio).latent.shape[0]
    perturbations = perturbations or BatchedPerturbationConfig.empty(batch)
    with torch.no_grad():
        return model(
            video.to_torch() if video else None,
            audio.to_torch() if audio else None,
            to_torch_perturbations(perturbations),
        )


def run_jax(
    model: ltx_jax.LTXModel,
    video: Inputs | None,
    audio: Inputs | None,
    perturbations: BatchedPerturbationConfig | None = None,
    dtype: jnp.dtype = jnp.float32,
) -> tuple[jnp.ndarray | None, jnp.ndarray | None]:
    forward = nnx.jit(lambda m, v, a: m(v, a, perturbations))
    return forward(model, video.to_jax(dtype) if video else None, audio.to_jax(dtype) if audio else None)
