"""Distilled (`ltx_pipelines/distilled.py`): both stages of the distilled model without guidance, over
its fixed sigmas (8 + 3 steps)."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    return two_stage_plan(request, stage_1(DISTILLED_SIGMA_VALUES))


FLOW = Flow(
    name="distilled",
    source="distilled",
    summary="the distilled model: two unguided stages over fixed sigmas (8 + 3 steps)",
    plan=plan,
    needs=Needs(upsampler=True),
    guided=False,
    reference_defaults=doubled_size,
)
