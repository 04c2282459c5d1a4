"""Keyframe interpolation (`ltx_pipelines/keyframe_interpolation.py`): the two-stage flow where every
image, frame 0 included, is a guiding keyframe (tokens appended to the video's) rather than frame 0
replacing the first latent frame."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    return two_stage_plan(request, stage_1(sigmas, guidance=request.guidance, images="keyframes"))


FLOW = Flow(
    name="keyframe-interpolation",
    source="keyframe_interpolation",
    summary="two stages between keyframe images (every --image a guiding keyframe)",
    plan=plan,
    needs=Needs(upsampler=True, distilled_lora="stage_2"),
    reference_defaults=doubled_size,
)
