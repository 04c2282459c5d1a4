"""Distilled (`ltx_pipelines/distilled.py`): both stages of the distilled model without guidance, over
its fixed sigmas (8 + 3 steps); from LTX-2.5 on, stage 1 samples with the ancestral Euler sampler
(`ANCESTRAL_SAMPLER_SINCE_VERSION`, read from the transformer file's `model_version`)."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import LatentGeometry

ANCESTRAL_SAMPLER_SINCE_VERSION = (2, 5)


def plan(request: Request, _: LatentGeometry) -> Plan:
    ancestral = request.model_version >= ANCESTRAL_SAMPLER_SINCE_VERSION
    stage = stage_1(DISTILLED_SIGMA_VALUES, sampler="euler_ancestral" if ancestral else "euler")
    return two_stage_plan(request, stage, stage_2_sampler="euler")


FLOW = Flow(
    name="distilled",
    source="distilled",
    summary="the distilled model: two unguided stages over fixed sigmas (8 + 3 steps)",
    plan=plan,
    needs=Needs(upsampler=True),
    guided=False,
    reference_defaults=doubled_size,
    auto_duration=True,
)
