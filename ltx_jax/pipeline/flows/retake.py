"""Retake (`ltx_pipelines/retake.py`): one stage at a source video's size from its encoded video and audio,
generating a time span again and keeping the rest (`regenerate_time_span`); a source without audio has all of
its audio generated. A stream not regenerated is frozen (1.2.0: noised, then seen at sigma 0 with nothing
generated, so that it drifts back to the source).

As 1.2.0's command and `RetakePipeline`'s default (`distilled=True`): the distilled sigmas without guidance
(`SimpleDenoiser`), its command's seed. `retake-guided` (retake_guided.py) is `RetakePipeline(distilled=False)`."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan, Stage
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import Guidance, LatentGeometry

NEEDS = Needs(audio_input="from_source", source_video=True)


def retake_stage(request: Request, sigmas: tuple[float, ...], guidance: Guidance) -> Stage:
    """The one stage of either retake flow: from the source's latents, its span generated again."""
    span = request.retake  # None only in a request not checked yet (`validate` requires it)
    keeps_video = span is not None and not span.regenerate_video
    keeps_audio = span is not None and request.audio is not None and not span.regenerate_audio
    return Stage(
        description="retake", downscale=1, sigmas=sigmas, guidance=guidance,
        initial_video="source", initial_audio="source", regenerate_span=True,
        frozen_video=keeps_video, frozen_audio=keeps_audio,
    )  # fmt: skip


def plan(request: Request, _: LatentGeometry) -> Plan:
    return Plan((retake_stage(request, DISTILLED_SIGMA_VALUES, Guidance()),))  # the conditional pass only


def retake_defaults(defaults: GenerationDefaults) -> GenerationDefaults:
    return dataclasses.replace(defaults, seed=42)


FLOW = Flow(
    name="retake",
    source="retake",
    summary="generate a time span of --video-path again (its video, audio or both), keeping the rest: the "
    "distilled sigmas without guidance, as ltx-pipelines 1.2.0",
    plan=plan,
    needs=NEEDS,
    guided=False,
    size_multiple=32,
    reference_defaults=retake_defaults,
    takes_images=False,
)
