"""The stages the two-stage flows share (`ltx_pipelines/ti2vid_two_stages.py` and its variants).

Stage 1 at half the height and width; the x2 latent upsampler; stage 2 at the full size without
guidance over the 3-step stage-2 sigmas, from the upsampled latent noised to the first sigma, the
stage-1 audio noised and denoised again with it (which stage's audio is decoded is the flow's), its
noise from the seed's key folded with 2. Stage 2 runs the DiT with the distilled LoRA (`weights="stage_2"`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows.flow import Plan, Stage
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import STAGE_2_DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import Sampler

STAGE_2 = Stage(
    description="stage 2",
    downscale=1,
    sigmas=STAGE_2_DISTILLED_SIGMA_VALUES,
    weights="stage_2",
    initial_video="upsampled",
    initial_audio="previous",
    noise_scale=float(np.float32(STAGE_2_DISTILLED_SIGMA_VALUES[0])),  # the float32 schedule's first value
    noise_stream=2,
    timing="stage_2_denoising",
)


def two_stage_plan(
    request: Request, stage_1: Stage, *, stage_2_sampler: Sampler | None = None, ships_stage_1_audio: bool = False
) -> Plan:
    """`stage_1` (at half size), then `STAGE_2` with stage 1's image and audio handling and sampler (or
    `stage_2_sampler`), unless the request skips stage 2. With `ships_stage_1_audio` the result's audio
    is stage 1's: stage 2 still denoises the audio beside the video, then drops it (1.2.0's two-stage
    and HQ flows)."""
    if request.skip_stage_2:
        return Plan((stage_1,))
    stage_2 = dataclasses.replace(
        STAGE_2, sampler=stage_2_sampler or stage_1.sampler, images=stage_1.images, fixed_audio=stage_1.fixed_audio
    )
    return Plan((stage_1, stage_2), audio_from=0 if ships_stage_1_audio else -1)


def stage_1(sigmas: tuple[float, ...], **options: object) -> Stage:
    """Stage 1 at half the size over `sigmas`, timed as "stage_1_denoising"."""
    return Stage(description="stage 1", downscale=2, sigmas=sigmas, timing="stage_1_denoising", **options)


def doubled_size(defaults: GenerationDefaults) -> GenerationDefaults:
    """The two-stage flows generate at twice the one-stage defaults' height and width."""
    return dataclasses.replace(defaults, height=2 * defaults.height, width=2 * defaults.width)
