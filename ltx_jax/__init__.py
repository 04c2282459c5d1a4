"""ltx-jax: the LTX-2 audio-video diffusion transformer in JAX/Flax NNX."""

from ltx_jax import parallel
from ltx_jax.config import LTXConfig
from ltx_jax.convert.checkpoint import convert_checkpoint, load_checkpoint
from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_jax.model.attention import AttentionOps
from ltx_jax.model.attention_backends import AttentionFn
from ltx_jax.model.modality import Modality
from ltx_jax.model.model import DIT_COMPILER_OPTIONS, LTXModel, to_denoised
from ltx_jax.pipeline.generated_video import GeneratedVideo
from ltx_jax.pipeline.ltx_pipeline import LTXPipeline

__all__ = [
    "AttentionFn",
    "AttentionOps",
    "BatchedPerturbationConfig",
    "DIT_COMPILER_OPTIONS",
    "GeneratedVideo",
    "LTXConfig",
    "LTXModel",
    "LTXPipeline",
    "Modality",
    "Perturbation",
    "PerturbationConfig",
    "PerturbationType",
    "convert_checkpoint",
    "load_checkpoint",
    "load_state_dict",
    "parallel",
    "to_denoised",
]
