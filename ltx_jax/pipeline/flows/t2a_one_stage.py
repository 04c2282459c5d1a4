"""Text to audio (`ltx_pipelines/t2a_one_stage.py`): one guided stage over the `LTX2Scheduler` schedule on the
audio-only DiT (`Flow.audio_only`: 1.2.0's `LTXAudioOnlyModelConfigurator`, the video weights never read). There
is no video stream: the prompt's audio context alone conditions it, CFG and STG act on the audio, and the
audio-video (modality) guidance is off (scale 1, as 1.2.0's command passes it: with no video, its extra pass would
equal the conditional one). The frames and frame rate only set the audio's duration (its latent frames are
`AudioLatentShape.from_video_pixel_shape`'s); where the frames are left out, LTX-2.5's duration head predicts them
from the prompt's audio context alone. The height and width are placeholders (`AUDIO_ONLY_SIZE`, 1.2.0's 512), never
used. The output is the decoded audio, which the command line writes as a 16-bit PCM .wav (1.2.0's `encode_audio`)."""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows.flow import AUDIO_ONLY_SIZE, Flow, Plan, Stage, audio_only_guidance
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry


def plan(request: Request, _: LatentGeometry) -> Plan:
    sigmas = tuple(ltx2_sigmas(request.num_inference_steps).tolist())
    stage = Stage(description="denoising", downscale=1, sigmas=sigmas, guidance=audio_only_guidance(request.guidance))
    return Plan((stage,))


def audio_defaults(defaults: GenerationDefaults) -> GenerationDefaults:
    """The model version's defaults with the audio guidance alone (1.2.0's t2a parser has only the --audio-* flags)
    and the placeholder size."""
    guidance = audio_only_guidance(defaults.guidance)
    return dataclasses.replace(defaults, height=AUDIO_ONLY_SIZE, width=AUDIO_ONLY_SIZE, guidance=guidance)


FLOW = Flow(
    name="t2a",
    source="t2a_one_stage",
    summary="text to audio: the audio-only DiT, one guided stage; writes a .wav (no video)",
    plan=plan,
    size_multiple=32,
    reference_defaults=audio_defaults,
    takes_images=False,
    auto_duration=True,
    audio_only=True,
)
