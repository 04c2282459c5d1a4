"""Two stages: half size with guidance, the x2 upsampler, then the full size with the distilled LoRA
(`ltx_pipelines/ti2vid_two_stages.py`; the stages in `two_stages.py`); the audio is stage 1's."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    return two_stage_plan(request, stage_1(sigmas, guidance=request.guidance), ships_stage_1_audio=True)


FLOW = Flow(
    name="two-stage",
    source="ti2vid_two_stages",
    summary="text/image to video: a guided half-size stage, x2 upsampling, a distilled refinement",
    plan=plan,
    needs=Needs(upsampler=True, distilled_lora="stage_2"),
    reference_defaults=doubled_size,
    auto_duration=True,
)
