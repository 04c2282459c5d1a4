"""Prompts -> latents -> mp4: schedules, guidance, the sampler, flows, media output, and `LTXPipeline`.

`LTXPipeline` loads the models of a flow once and generates many videos. Below it, the flows
(`generate` with each of `FLOWS`) take their models as callables
(`Components`), so they run the DiT on one device or under `SequenceParallel` on a mesh alike.
"""

from ltx_jax.pipeline.denoisers import GuidedDenoiser
from ltx_jax.pipeline.generated_video import GeneratedVideo
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.ltx_pipeline import ForwardStats, LTXPipeline, RuntimeOptions
from ltx_jax.pipeline.media_io import video_to_uint8, write_mp4
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.pipelines import generate
from ltx_jax.pipeline.prompts import TextEncoder
from ltx_jax.pipeline.requests import (
    FLOWS,
    AudioInput,
    Components,
    Flow,
    ImageCondition,
    Request,
    RetakeSpan,
    VideoCondition,
    validate,
)
from ltx_jax.pipeline.samplers import euler_denoising_loop
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES, ltx2_sigmas
from ltx_jax.pipeline.settings import DEFAULT_NEGATIVE_PROMPT, GenerationDefaults, GenerationSettings
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings, denoise_audio_video
from ltx_jax.pipeline.types import AudioLatentShape, LatentState, VideoLatentShape, VideoPixelShape

__all__ = [
    "DEFAULT_NEGATIVE_PROMPT",
    "DISTILLED_SIGMA_VALUES",
    "FLOWS",
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
    "PromptEmbeddings",
    "Request",
    "RetakeSpan",
    "VideoCondition",
    "RuntimeOptions",
    "TextEncoder",
    "VideoLatentShape",
    "VideoPixelShape",
    "denoise_audio_video",
    "euler_denoising_loop",
    "generate",
    "ltx2_sigmas",
    "validate",
    "video_to_uint8",
    "write_mp4",
]
