"""IC-LoRA (`ltx_pipelines/ic_lora.py`): the distilled flow whose stage 1 runs the DiT with the
IC-LoRA (`Components.transformer`) and sees reference videos (depth, pose, edges) as appended
tokens; stage 2 runs the plain DiT (`stage_2_transformer`) without them, or is skipped."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    return two_stage_plan(request, stage_1(DISTILLED_SIGMA_VALUES, references=True))


FLOW = Flow(
    name="ic-lora",
    source="ic_lora",
    summary="the distilled flow with an IC-LoRA and reference videos (depth, pose, edges)",
    plan=plan,
    needs=Needs(upsampler=True, ic_lora=True),
    guided=False,
    reference_defaults=doubled_size,
)
