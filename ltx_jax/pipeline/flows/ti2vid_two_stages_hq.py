"""Two stages, HQ (`ltx_pipelines/ti2vid_two_stages_hq.py`): the res_2s sampler in both stages, the
stage-1 schedule shifted for the stage-1 latent's own token count (its scheduler is given the
latent), the distilled LoRA in both stages at their own strengths, and the HQ defaults (the
reference's HQ parser uses them whatever the checkpoint); the audio is stage 1's."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.defaults import HQ_DEFAULTS, GenerationDefaults
from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry
from ltx_jax.pipeline.types import VideoPixelShape


def plan(request: Request, geometry: LatentGeometry) -> Plan:
    half = VideoPixelShape(1, request.num_frames, request.height // 2, request.width // 2, request.frame_rate)
    sigmas = ltx2_sigmas(request.num_inference_steps, tokens=geometry.video(half).token_count())
    stage = stage_1(tuple(sigmas.tolist()), guidance=request.guidance, sampler="res2s")
    return two_stage_plan(request, stage, ships_stage_1_audio=True)


def hq_defaults(model: GenerationDefaults) -> GenerationDefaults:
    """The HQ preset, whatever the checkpoint, but for the images' CRF, which is the model version's."""
    return dataclasses.replace(HQ_DEFAULTS, image_crf=model.image_crf)


FLOW = Flow(
    name="two-stage-hq",
    source="ti2vid_two_stages_hq",
    summary="two stages with the res_2s sampler and the distilled LoRA in both, at 1088x1920 by default",
    plan=plan,
    needs=Needs(upsampler=True, distilled_lora="both_stages"),
    reference_defaults=hq_defaults,
    auto_duration=True,
)
