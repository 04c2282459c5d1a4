"""One stage at the full size with guidance over the `LTX2Scheduler` schedule
(`ltx_pipelines/ti2vid_one_stage.py`)."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Plan, Stage
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    return Plan((Stage(description="denoising", downscale=1, sigmas=sigmas, guidance=request.guidance),))


FLOW = Flow(
    name="one-stage",
    source="ti2vid_one_stage",
    summary="text/image to video, one guided stage at the full size",
    plan=plan,
    size_multiple=32,
    auto_duration=True,
)
