"""Guided retake (`ltx_pipelines/retake.py`'s `RetakePipeline(distilled=False)`): the retake flow's stage
(retake.py) with guidance over the LTX-2 scheduler's sigmas; `__call__`'s 40 steps and empty negative prompt."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows.flow import Flow, Plan
from ltx_jax.pipeline.flows.retake import NEEDS, retake_stage
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    return Plan((retake_stage(request, sigmas, request.guidance),))


def guided_retake_defaults(defaults: GenerationDefaults) -> GenerationDefaults:
    return dataclasses.replace(defaults, num_inference_steps=40, seed=42, negative_prompt="")


FLOW = Flow(
    name="retake-guided",
    source="retake",
    summary="retake with guidance over --num-inference-steps (RetakePipeline(distilled=False))",
    plan=plan,
    needs=NEEDS,
    size_multiple=32,
    reference_defaults=guided_retake_defaults,
    takes_images=False,
)
