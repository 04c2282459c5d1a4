"""Audio to video (`ltx_pipelines/a2vid_two_stage.py`): two stages around a given audio track, whose
latent (`Components.encode_audio`) stays fixed (denoise mask 0, never noised) while the video is
denoised with guidance in stage 1 (the audio unguided) and refined in stage 2; the output's audio
is the input itself."""

from __future__ import annotations

from ltx_jax.pipeline.flows.flow import Flow, Needs, Plan
from ltx_jax.pipeline.flows.two_stages import doubled_size, stage_1, two_stage_plan
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import Guidance, LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    guidance = Guidance(request.guidance.video)  # the fixed audio gets none
    return two_stage_plan(request, stage_1(sigmas, guidance=guidance, initial_audio="input", fixed_audio=True))


FLOW = Flow(
    name="a2vid",
    source="a2vid_two_stage",
    summary="audio to video: two stages around --audio-path, which stays the output's audio",
    plan=plan,
    needs=Needs(upsampler=True, distilled_lora="stage_2", audio_input="required"),
    audio_output="input",
    reference_defaults=doubled_size,
)
