"""The generation flows of ltx-pipelines: one stage, two stages, distilled, keyframe interpolation.

Sources: `ltx_pipelines/ti2vid_one_stage.py`, `ti2vid_two_stages.py`, `distilled.py`,
`keyframe_interpolation.py` (1.0.0).
- one stage: the full resolution with guidance over the `LTX2Scheduler` schedule;
- two stages: half resolution with guidance, 2x latent upsampler, then the full resolution
  without guidance (the distilled LoRA applied to the DiT) over the 3-step stage-2 sigmas, starting
  from the upsampled latent noised to the first sigma; the stage-1 audio is noised and denoised
  again with it, and that stage-2 audio is kept (as 1.0.0 decodes it);
- distilled: both stages without guidance (8 + 3 steps);
- keyframe interpolation: two stages, where every image, frame 0 included, is a guiding keyframe
  (tokens appended to the video's) rather than frame 0 replacing the first latent frame;
- two stages HQ (`ti2vid_two_stages_hq.py`): two stages with the res_2s sampler, the stage-1
  schedule shifted for the stage-1 latent's token count, the distilled LoRA in both stages at
  their own strengths (components.transformer and stage_2_transformer);
- IC-LoRA (`ic_lora.py`): the distilled flow whose stage 1 runs the DiT with the IC-LoRA
  (components.transformer) and sees reference videos (depth, pose, edges) as appended tokens;
  stage 2 runs the plain DiT (stage_2_transformer) without them, or is skipped;
- audio to video (`a2vid_two_stage.py`): two stages around a given audio track, whose latent
  (`components.encode_audio`) stays fixed (denoise mask 0, never noised) while the video is
  denoised with guidance in stage 1 (the audio unguided) and refined in stage 2;
- retake (`retake.py`): one guided stage at a source video's size from its encoded video and audio,
  generating a time span again and keeping the rest (`regenerate_time_span`).
The components are callables, so the flows run on any mesh and with any decoder implementation.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.modality import Modality
from ltx_jax.pipeline.conditioning import (
    condition_by_keyframe,
    condition_by_latent_index,
    condition_by_reference_latent,
    downsample_mask_to_latent,
    keep_all,
    regenerate_time_span,
    with_attention_strength,
)
from ltx_jax.pipeline.requests import (
    GUIDED_TWO_STAGE_FLOWS,
    SINGLE_STAGE_FLOWS,
    UNGUIDED_FLOWS,
    Components,
    Flow,
    ImageCondition,
    Request,
    VideoCondition,
    validate,
)
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES, ltx2_sigmas
from ltx_jax.pipeline.stages import (
    Conditioning,
    Guidance,
    PromptEmbeddings,
    Sampler,
    denoise_audio_video,
    first_forward_inputs,
)
from ltx_jax.pipeline.types import LatentState, VideoLatentShape, VideoPixelShape


def generate(
    components: Components, request: Request, flow: Flow, timings: dict[str, float] | None = None
) -> tuple[jax.Array | None, jax.Array | None]:
    """Runs `flow`; returns the final video latent `(B, C, F, H, W)` and audio latent `(B, C, T, M)`.
    With `timings`, a two-stage flow adds the wall seconds of "stage_1_denoising", "upsampling" and
    "stage_2_denoising" to it (a2vid also "audio_encoding")."""
    validate(request, flow)
    key = jax.random.key(request.seed)
    if flow == "one-stage":
        sigmas = ltx2_sigmas(request.num_inference_steps)
        return _stage(components, request, 1, sigmas, key, request.guidance, "denoising")
    if flow == "retake":
        return _retake(components, request, key)
    guided = flow in GUIDED_TWO_STAGE_FLOWS
    if components.upsample is None and not request.skip_stage_2:
        raise ValueError(f"The {flow} flow needs the spatial upsampler (components.upsample).")
    stage_1_sigmas = _stage_1_sigmas(components, request, flow)
    timed = functools.partial(_timed, {} if timings is None else timings)
    audio = None
    if flow == "a2vid":
        audio = timed("audio_encoding", _input_audio_latent, components, request)
        request = _audio_unguided(request)
    guidance = request.guidance if guided else Guidance()
    options = {
        "keyframes_only": flow == "keyframe-interpolation",
        "sampler": "res2s" if flow == "two-stage-hq" else "euler",
        "audio_conditionings": [keep_all] if flow == "a2vid" else [],
    }
    video, audio = timed(
        "stage_1_denoising", _stage, components, request, 2, stage_1_sigmas, key, guidance, "stage 1", **options,
        initial=(None, audio), references=request.reference_videos,
    )  # fmt: skip
    if request.skip_stage_2:
        return video, audio
    upsampled = timed("upsampling", components.upsample, video[:1])
    stage_2 = dataclasses.replace(components, transformer=components.stage_2_transformer or components.transformer)
    sigmas = np.asarray(STAGE_2_DISTILLED_SIGMA_VALUES, np.float32)
    return timed(
        "stage_2_denoising", _stage, stage_2, request, 1, sigmas, jax.random.fold_in(key, 2), Guidance(), "stage 2",
        initial=(upsampled, audio), noise_scale=float(sigmas[0]), **options,
    )  # fmt: skip


def final_latent_shapes(components: Components, request: Request, flow: Flow) -> tuple[tuple, tuple]:
    """The shapes of the video and audio latents `generate` returns for `request` (stage 1's size where
    stage 2 is skipped): what the decoders will be given."""
    scale = 2 if request.skip_stage_2 and flow not in SINGLE_STAGE_FLOWS else 1
    pixels = _pixels(request, scale)
    return components.geometry.video(pixels).shape, components.geometry.audio(pixels).shape


def stage_2_first_forward(
    components: Components, request: Request, flow: Flow
) -> tuple[Modality | None, Modality | None, BatchedPerturbationConfig] | None:
    """The shapes (`jax.ShapeDtypeStruct`s) of the inputs of stage 2's first DiT forward for `request`,
    and its perturbations, so that stage 2 can be compiled while stage 1 runs; None where `flow` has
    no stage 2 or the request skips it, and where stage 2 is conditioned on images (encoding them is
    real work, done when stage 2 starts)."""
    if flow in SINGLE_STAGE_FLOWS or request.skip_stage_2 or request.images:
        return None
    return first_forward_inputs(
        _pixels(request), request.prompt, geometry=components.geometry, dtype=components.dtype,
        negative=request.negative, audio_conditionings=[keep_all] if flow == "a2vid" else [],
        max_batch_size=request.max_batch_size,
    )  # fmt: skip


def _pixels(request: Request, downscale: int = 1) -> VideoPixelShape:
    """The request's video size, at 1/`downscale` of its height and width (a stage's size)."""
    return VideoPixelShape(
        1, request.num_frames, request.height // downscale, request.width // downscale, request.frame_rate
    )


def _stage_1_sigmas(components: Components, request: Request, flow: Flow) -> np.ndarray:
    """The distilled sigmas, or `ltx2_sigmas` shifted for 4,096 tokens (the reference's default), or
    for HQ for the stage-1 latent's own token count (its scheduler is given the latent)."""
    if flow in UNGUIDED_FLOWS:
        return np.asarray(DISTILLED_SIGMA_VALUES)
    if flow != "two-stage-hq":
        return ltx2_sigmas(request.num_inference_steps)
    half = _pixels(request, 2)
    return ltx2_sigmas(request.num_inference_steps, tokens=components.geometry.video(half).token_count())


def _input_audio_latent(components: Components, request: Request) -> np.ndarray:
    """a2vid's input audio encoded and cut to the video's duration (`A2VidPipelineTwoStage.__call__`)."""
    if components.encode_audio is None:
        raise ValueError("The a2vid flow needs the audio VAE encoder (components.encode_audio).")
    audio = request.audio
    latent = np.asarray(components.encode_audio(audio.waveform, audio.sample_rate))
    shape = _pixels(request)
    frames = components.geometry.audio(shape).frames
    if latent.shape[2] < frames:
        raise ValueError(
            f"The input audio lasts {audio.waveform.shape[1] / audio.sample_rate:.3f} s ({latent.shape[2]} latent "
            f"frames); {request.num_frames} frames at {request.frame_rate} fps need "
            f"{request.num_frames / request.frame_rate:.3f} s ({frames}). Give a longer audio (--audio-path, "
            "--audio-start-time), or fewer frames."
        )
    return latent[:, :, :frames]


def _retake(components: Components, request: Request, key: jax.Array) -> tuple[jax.Array | None, jax.Array | None]:
    """retake (`RetakePipeline.__call__`): one guided stage at the source's size, starting from its encoded
    video and audio, generating only the span again (`regenerate_time_span`); a source without audio
    has all of its audio generated."""
    if components.encode_video is None or components.encode_audio is None:
        raise ValueError("The retake flow needs the video and audio VAE encoders (components.encode_video/_audio).")
    span = request.retake
    video = components.encode_video(span.video, request.height, request.width, request.num_frames)
    audio, audio_conditionings = None, []
    if request.audio is not None:
        shape = _pixels(request)
        encoded = np.asarray(components.encode_audio(request.audio.waveform, request.audio.sample_rate))
        audio = _fitted(encoded, components.geometry.audio(shape).frames)
        audio_conditionings = [functools.partial(regenerate_time_span, **_span(span.window("audio")))]
    return _stage(
        components, request, 1, ltx2_sigmas(request.num_inference_steps), key, request.guidance, "retake",
        initial=(video, audio), audio_conditionings=audio_conditionings,
        conditionings=[functools.partial(regenerate_time_span, **_span(span.window("video")))],
    )  # fmt: skip


def _span(window: tuple[float, float]) -> dict[str, float]:
    return {"start_time": window[0], "end_time": window[1]}


def _fitted(latent: np.ndarray, frames: int) -> np.ndarray:
    """`latent` `(B, C, T, M)` cut, or zero-padded, to `frames` (retake's `_encode_audio_for_retake`)."""
    if latent.shape[2] >= frames:
        return latent[:, :, :frames]
    pad = np.zeros((*latent.shape[:2], frames - latent.shape[2], latent.shape[3]), latent.dtype)
    return np.concatenate([latent, pad], axis=2)


def _audio_unguided(request: Request) -> Request:
    """a2vid's audio is fixed: it gets no guidance, and its unconditional pass sees the prompt's audio
    context (the reference's audio guider has no negative context)."""
    negative = None if request.negative is None else PromptEmbeddings(request.negative.video, request.prompt.audio)
    return dataclasses.replace(request, guidance=Guidance(request.guidance.video), negative=negative)


def _timed(timings: dict[str, float], phase: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
    """`fn(*args, **kwargs)`, waited for, its wall seconds added to `timings[phase]`."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start
    return out


def _stage(
    components: Components,
    request: Request,
    downscale: int,
    sigmas: np.ndarray,
    key: jax.Array,
    guidance: Guidance,
    description: str,
    initial: tuple[jax.Array | None, jax.Array | None] = (None, None),
    noise_scale: float = 1.0,
    keyframes_only: bool = False,
    sampler: Sampler = "euler",
    references: Sequence[VideoCondition] = (),
    audio_conditionings: Sequence[Conditioning] = (),
    conditionings: Sequence[Conditioning] = (),
) -> tuple[jax.Array | None, jax.Array | None]:
    shape = _pixels(request, downscale)
    return denoise_audio_video(
        components.transformer,
        shape,
        sigmas,
        key,
        request.prompt,
        geometry=components.geometry,
        dtype=components.dtype,
        guidance=guidance,
        negative=request.negative,
        conditionings=[
            *_image_conditionings(components, request.images, shape, keyframes_only),
            *_reference_conditionings(components, references, shape, request),
            *conditionings,
        ],
        initial_video_latent=None if initial[0] is None else np.asarray(initial[0]),
        initial_audio_latent=None if initial[1] is None else np.asarray(initial[1]),
        noise_scale=noise_scale,
        max_batch_size=request.max_batch_size,
        description=description,
        sampler=sampler,
        audio_conditionings=audio_conditionings,
    )


def _image_conditionings(
    components: Components, images: Sequence[ImageCondition], shape: VideoPixelShape, keyframes_only: bool = False
) -> list[Conditioning]:
    """Frame 0 replaces the first latent frame (the reference's `combined_image_conditionings`), other
    frames are appended as keyframe tokens; with `keyframes_only` frame 0 too is a keyframe
    (`image_conditionings_by_adding_guiding_latent`)."""
    if images and components.encode_image is None:
        raise ValueError("Image conditioning needs the video VAE encoder (components.encode_image).")
    conditionings: list[Conditioning] = []
    for image in images:
        latent = np.asarray(components.encode_image(image.image, shape.height, shape.width, image.crf))
        if image.frame_idx == 0 and not keyframes_only:
            conditionings.append(
                lambda state, target, latent=latent, s=image.strength: condition_by_latent_index(
                    state, latent, s, 0, target
                )
            )
        else:
            conditionings.append(
                lambda state, _, latent=latent, image=image: condition_by_keyframe(
                    state, latent, image.frame_idx, image.strength, shape.fps
                )
            )
    return conditionings


def _reference_conditionings(
    components: Components, videos: Sequence[VideoCondition], shape: VideoPixelShape, request: Request
) -> list[Conditioning]:
    """IC-LoRA's reference videos, encoded at 1/`reference_downscale_factor` of the stage's size, with
    the request's attention strength (`ICLoraPipeline._create_conditionings`)."""
    if not videos:
        return []
    if components.encode_video is None:
        raise ValueError("Reference videos need the video VAE encoder (components.encode_video).")
    scale = components.reference_downscale_factor
    if shape.height % scale or shape.width % scale:
        raise ValueError(
            f"The stage's size {shape.height}x{shape.width} must be divisible by the IC-LoRA's "
            f"reference_downscale_factor ({scale}); choose a height and width that are."
        )
    strength, mask = request.reference_attention_strength, request.reference_attention_mask
    conditionings: list[Conditioning] = []
    for video in videos:
        latent = np.asarray(
            components.encode_video(video.video, shape.height // scale, shape.width // scale, shape.frames)
        )
        condition = functools.partial(
            _append_reference, latent=latent, scale=scale, strength=video.strength, fps=shape.fps
        )
        if mask is not None:
            cross = downsample_mask_to_latent(mask, VideoLatentShape(*latent.shape)) * np.float32(strength)
            condition = with_attention_strength(condition, cross)
        elif strength < 1.0:
            condition = with_attention_strength(condition, strength)
        conditionings.append(condition)
    return conditionings


def _append_reference(
    state: LatentState, target: VideoLatentShape, *, latent: np.ndarray, scale: int, strength: float, fps: float
) -> LatentState:
    return condition_by_reference_latent(state, latent, scale, strength, fps, target.token_count())
