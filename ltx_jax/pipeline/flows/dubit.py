"""Dub-It (`ltx_pipelines/dubit.py`): a new soundtrack and lip movements for a given video. The distilled DiT with the
Dub-It IC-LoRA (`Components.transformer`) runs both stages without guidance over the distilled sigmas, with Euler
(1.2.0's `DiffusionStage` default, also on LTX-2.5). The one reference video (`--reference-video`) gives the
generation its frames (8k+1, rounded down) and frame rate, and conditions both stages: its frames as IC-LoRA
reference tokens at the stage's size, and its audio track, encoded whole, as reference audio tokens placed before
the generated audio in time (RoPE positions shifted by minus its duration and 0.04 s). Stage 2 starts from the
upsampled video; its audio is stage 1's, frozen (never noised, denoise mask 0, seen at sigma 0), with stage 1's
audio as its reference tokens. The output's audio is stage 1's."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import STAGE_2, doubled_size, stage_1
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import LatentGeometry


def plan(_request: Request, _geometry: LatentGeometry) -> Plan:
    first = stage_1(DISTILLED_SIGMA_VALUES, references=True, audio_reference="input")
    # The IC-LoRA's weights in both stages (1.2.0 builds its one `DiffusionStage` with it); the frozen audio is
    # `fixed_audio`: 1.2.0's `frozen=True, noise_scale=0.0` keeps it exactly as given.
    second = dataclasses.replace(
        STAGE_2, weights="stage_1", references=True, audio_reference="previous", fixed_audio=True
    )
    return Plan((first, second), audio_from=0)


FLOW = Flow(
    name="dubit",
    source="dubit",
    summary="Dub-It: new speech and lip movements for --reference-video (its frames, frame rate and voice), with "
    "the Dub-It IC-LoRA (--lora) on the distilled model: two unguided stages",
    plan=plan,
    needs=Needs(upsampler=True, ic_lora=True, audio_input="reference"),
    guided=False,
    reference_defaults=doubled_size,
    takes_images=False,
)
