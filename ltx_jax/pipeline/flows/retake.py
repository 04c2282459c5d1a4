"""Retake (`ltx_pipelines/retake.py`): one guided stage at a source video's size from its encoded video
and audio, generating a time span again and keeping the rest (`regenerate_time_span`); a source
without audio has all of its audio generated. A stream not regenerated is frozen (1.2.0: noised, then
seen at sigma 0 with nothing generated, so that it drifts back to the source). Its defaults are
`RetakePipeline.__call__`'s 40 steps and empty negative prompt, and its command's seed."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan, Stage
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    span = request.retake  # None only in a request not checked yet (`validate` requires it)
    keeps_video = span is not None and not span.regenerate_video
    keeps_audio = span is not None and request.audio is not None and not span.regenerate_audio
    stage = Stage(
        description="retake", downscale=1, sigmas=sigmas, guidance=request.guidance,
        initial_video="source", initial_audio="source", regenerate_span=True,
        frozen_video=keeps_video, frozen_audio=keeps_audio,
    )  # fmt: skip
    return Plan((stage,))


def retake_defaults(defaults: GenerationDefaults) -> GenerationDefaults:
    return dataclasses.replace(defaults, num_inference_steps=40, seed=42, negative_prompt="")


FLOW = Flow(
    name="retake",
    source="retake",
    summary="generate a time span of --video-path again (its video, audio or both), keeping the rest",
    plan=plan,
    needs=Needs(audio_input="from_source", source_video=True),
    size_multiple=32,
    reference_defaults=retake_defaults,
    takes_images=False,
)
