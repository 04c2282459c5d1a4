"""Prompts -> latents -> mp4: schedules, guidance, the sampler, flows, media output, and `LTXPipeline`.

`LTXPipeline` loads the models of a flow once and generates many videos. Below it, each flow is a
`Flow` in `flows` (one module each, named by the registry: `flows.names()`, `flows.get(name)`,
`flows.register(flow)`), and `generate` runs its plan on models given as callables (`Components`),
so they run the DiT on one device or under `SequenceParallel` on a mesh alike.
"""

from ltx_jax.pipeline import flows
from ltx_jax.pipeline.defaults import DEFAULT_NEGATIVE_PROMPT, GenerationDefaults
from ltx_jax.pipeline.denoisers import GuidedDenoiser
from ltx_jax.pipeline.flows import Flow, Needs, Plan, Stage
from ltx_jax.pipeline.generated_video import GeneratedVideo
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.ltx_pipeline import ForwardStats, LTXPipeline, RuntimeOptions
from ltx_jax.pipeline.media_io import video_to_uint8, write_mp4
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.pipelines import generate, validate
from ltx_jax.pipeline.prompts import TextEncoder
from ltx_jax.pipeline.requests import (
    AudioInput,
    Components,
    ImageCondition,
    Request,
    RetakeSpan,
    VideoCondition,
)
from ltx_jax.pipeline.samplers import euler_denoising_loop
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES, ltx2_sigmas
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings, denoise_audio_video
from ltx_jax.pipeline.types import AudioLatentShape, LatentState, VideoLatentShape, VideoPixelShape

__all__ = [
    "DEFAULT_NEGATIVE_PROMPT",
    "DISTILLED_SIGMA_VALUES",
    "STAGE_2_DISTILLED_SIGMA_VALUES",
    "AudioInput",
    "AudioLatentShape",
    "CheckpointFiles",
    "Components",
    "Flow",
    "ForwardStats",
    "GeneratedVideo",
    "GenerationDefaults",
    "GenerationSettings",
    "Guidance",
    "GuidedDenoiser",
    "ImageCondition",
    "LTXPipeline",
    "LatentGeometry",
    "LatentState",
    "MultiModalGuiderParams",
    "Needs",
    "Plan",
    "PromptEmbeddings",
    "Request",
    "RetakeSpan",
    "VideoCondition",
    "RuntimeOptions",
    "Stage",
    "TextEncoder",
    "VideoLatentShape",
    "VideoPixelShape",
    "denoise_audio_video",
    "euler_denoising_loop",
    "flows",
    "generate",
    "ltx2_sigmas",
    "validate",
    "video_to_uint8",
    "write_mp4",
]
