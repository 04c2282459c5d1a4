"""Runs a flow's plan: the stages of `ltx_jax.pipeline.flows` on the models a flow calls.

`generate(components, request, flow)` checks the request, asks the flow for its `Plan`, and runs
each `Stage` in order: its initial latents (noise, the previous stage's upsampled, or encoded
inputs), its conditionings (images, reference videos, a retake span, a fixed audio), its sampler
and guidance, on the weights it names. The components are callables, so the flows run on any mesh
and with any decoder implementation. What each flow does, and which ltx-pipelines file it follows,
is in its module under `flows/`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.modality import Modality
from ltx_jax.pipeline import flows, requests
from ltx_jax.pipeline.conditioning import (
    condition_by_audio_reference,
    condition_by_keyframe,
    condition_by_latent_index,
    condition_by_reference_latent,
    downsample_mask_to_latent,
    keep_all,
    regenerate_time_span,
    with_attention_strength,
)
from ltx_jax.pipeline.flows import Flow, Plan, Stage
from ltx_jax.pipeline.requests import Components, ImageCondition, Request, VideoCondition
from ltx_jax.pipeline.stages import Conditioning, PromptEmbeddings, denoise_audio_video, first_forward_inputs
from ltx_jax.pipeline.types import LatentState, VideoLatentShape, VideoPixelShape

Latents = tuple[jax.Array | None, jax.Array | None]


def generate(
    components: Components, request: Request, flow: str | Flow, timings: dict[str, float] | None = None
) -> Latents:
    """Runs `flow` (a registered name or a `Flow`); returns the final video latent `(B, C, F, H, W)`
    and audio latent `(B, C, T, M)`. With `timings`, each timed stage adds its wall seconds under its
    `Stage.timing` ("stage_1_denoising", "stage_2_denoising"), with "upsampling" and the encoding of
    inputs ("audio_encoding")."""
    flow = flows.get(flow)
    validate(request, flow)
    return run(components, request, flow.plan(request, components.geometry), timings)


def validate(request: Request, flow: str | Flow) -> None:
    """Raises before any device work, naming the argument and the fix (`flow`: a name or a `Flow`)."""
    flow = flows.get(flow)
    requests.check_sizes(request.height, request.width, request.num_frames, request.frame_rate, flow)
    requests.check_images(request.images, request.num_frames, flow)
    requests.check_reference_videos(request.reference_videos, request.skip_stage_2, flow)
    masked = request.reference_attention_mask is not None
    requests.check_reference_attention(request.reference_attention_strength, masked, flow)
    requests.check_attention_mask(request.reference_attention_mask)
    requests.check_audio_input(request.audio, flow)
    requests.check_retake(request.retake, request.num_frames, request.frame_rate, flow)
    requests.check_audio_only(request.prompt, request.negative, flow)
    if flow.guided and request.guidance.needs_negative_prompt() and request.negative is None:
        raise ValueError(
            "A cfg scale != 1 needs the negative prompt's embeddings (Request.negative); pass them, or set both "
            "cfg scales to 1."
        )


def run(components: Components, request: Request, plan: Plan, timings: dict[str, float] | None = None) -> Latents:
    """`generate` for a request already checked (`validate`, or `GenerationSettings.resolve`), its flow's plan
    built (`Flow.plan(request, components.geometry)`)."""
    _check_components(components, plan)
    key = jax.random.key(request.seed)
    timed = functools.partial(_timed, {} if timings is None else timings)
    video = audio = None
    audios = []
    for stage in plan.stages:
        reference = _audio_reference(components, request, stage, audio, timed)
        video, audio = _initial_latents(components, request, stage, (video, audio), timed)
        stage_key = jax.random.fold_in(key, stage.noise_stream) if stage.noise_stream else key
        run_stage = functools.partial(_stage, components, request, stage, stage_key, (video, audio), reference)
        video, audio = timed(stage.timing, run_stage) if stage.timing else run_stage()
        audios.append(audio)
    return video, audios[plan.audio_from]


def final_latent_shapes(components: Components, request: Request, plan: Plan) -> tuple[tuple, tuple]:
    """The shapes of the video and audio latents `run` returns for `request` and its `plan`: what the
    decoders will be given (the plan's last stage's size)."""
    pixels = stage_pixels(request, plan.decoded_downscale)
    return components.geometry.video(pixels).shape, components.geometry.audio(pixels).shape


def later_first_forwards(
    components: Components, request: Request, plan: Plan
) -> list[tuple[Stage, tuple[Modality | None, Modality | None, BatchedPerturbationConfig]]]:
    """For each stage of `plan` after the first whose first DiT forward can be compiled while stage 1
    runs (`_compiles_ahead`), that stage and the shapes (`jax.ShapeDtypeStruct`s) of its forward's
    inputs with its perturbations."""
    return [
        (stage, first_forward_inputs(
            stage_pixels(request, stage.downscale), request.prompt, geometry=components.geometry,
            dtype=components.dtype, negative=request.negative,
            audio_conditionings=[keep_all] if stage.fixed_audio else [], max_batch_size=request.max_batch_size,
        ))
        for stage in plan.stages[1:]
        if _compiles_ahead(stage, request)
    ]  # fmt: skip


def _compiles_ahead(stage: Stage, request: Request) -> bool:
    """Whether a stage's first forward can be compiled while an earlier stage runs: its inputs' shapes
    must not wait on encoding (images, reference videos, a source video: real work, done as it starts)."""
    return not (request.images or stage.references or stage.initial_video == "source")


def stage_transformer(components: Components, stage: Stage) -> Any:  # noqa: ANN401 - a Forward
    """The DiT a stage runs: stage 2's weights where the stage names them and they exist."""
    if stage.weights == "stage_2" and components.stage_2_transformer is not None:
        return components.stage_2_transformer
    return components.transformer


def _check_components(components: Components, plan: Plan) -> None:
    """Raises naming the missing component and the stage that needs it, before any stage runs."""
    for stage in plan.stages:
        if stage.initial_video == "upsampled" and components.upsample is None:
            raise ValueError(
                f"{stage.description} starts from the upsampled latent: it needs the spatial upsampler "
                "(components.upsample)."
            )
        if "input" in (stage.initial_audio, stage.audio_reference) and components.encode_audio is None:
            raise ValueError(
                f"{stage.description} encodes the input audio: it needs the audio VAE encoder "
                "(components.encode_audio)."
            )
        source = stage.initial_video == "source" or stage.initial_audio == "source"
        if source and (components.encode_video is None or components.encode_audio is None):
            raise ValueError(
                f"{stage.description} starts from the source video: it needs the video and audio VAE encoders "
                "(components.encode_video, components.encode_audio)."
            )


def _initial_latents(
    components: Components, request: Request, stage: Stage, previous: Latents, timed: Callable[..., Any]
) -> tuple[Any, Any]:
    """The latents `stage` starts from (None: noise), from the previous stage's `previous` or the request's inputs."""
    video, audio = previous
    if stage.initial_video == "upsampled":
        video = timed("upsampling", components.upsample, video[:1])
    elif stage.initial_video == "source":
        video = components.encode_video(request.retake.video, request.height, request.width, request.num_frames)
    else:
        video = None
    if stage.initial_audio == "input":
        audio = timed("audio_encoding", _input_audio_latent, components, request)
    elif stage.initial_audio == "source":
        audio = _source_audio_latent(components, request)
    elif stage.initial_audio == "noise":
        audio = None
    return video, audio


def _audio_reference(
    components: Components, request: Request, stage: Stage, previous: jax.Array | None, timed: Callable[..., Any]
) -> np.ndarray | None:
    """The audio latent `stage` appends as reference tokens (`Stage.audio_reference`): the request's audio
    encoded whole (Dub-It's reference video's track, `_encode_reference_audio_vae_latent`), the previous stage's
    audio `previous`, or None."""
    if stage.audio_reference == "input":
        audio = request.audio
        return np.asarray(timed("audio_encoding", components.encode_audio, audio.waveform, audio.sample_rate))
    if stage.audio_reference == "previous":
        return np.asarray(previous)
    return None


def stage_pixels(request: Request, downscale: int = 1) -> VideoPixelShape:
    """The request's video size, at 1/`downscale` of its height and width (a stage's size)."""
    return VideoPixelShape(
        1, request.num_frames, request.height // downscale, request.width // downscale, request.frame_rate
    )


def _input_audio_latent(components: Components, request: Request) -> np.ndarray:
    """a2vid's input audio encoded and cut to the video's duration (`A2VidPipelineTwoStage.__call__`)."""
    audio = request.audio
    latent = np.asarray(components.encode_audio(audio.waveform, audio.sample_rate))
    shape = stage_pixels(request)
    frames = components.geometry.audio(shape).frames
    if latent.shape[2] < frames:
        raise ValueError(
            f"The input audio lasts {audio.waveform.shape[1] / audio.sample_rate:.3f} s ({latent.shape[2]} latent "
            f"frames); {request.num_frames} frames at {request.frame_rate} fps need "
            f"{request.num_frames / request.frame_rate:.3f} s ({frames}). Give a longer audio (--audio-path, "
            "--audio-start-time), or fewer frames."
        )
    return latent[:, :, :frames]


def _source_audio_latent(components: Components, request: Request) -> np.ndarray | None:
    """retake's source audio encoded and cut, or zero-padded, to the video (None: the source has none)."""
    if request.audio is None:
        return None
    encoded = np.asarray(components.encode_audio(request.audio.waveform, request.audio.sample_rate))
    return _fitted(encoded, components.geometry.audio(stage_pixels(request)).frames)


def _fitted(latent: np.ndarray, frames: int) -> np.ndarray:
    """`latent` `(B, C, T, M)` cut, or zero-padded, to `frames` (retake's `_encode_audio_for_retake`)."""
    if latent.shape[2] >= frames:
        return latent[:, :, :frames]
    pad = np.zeros((*latent.shape[:2], frames - latent.shape[2], latent.shape[3]), latent.dtype)
    return np.concatenate([latent, pad], axis=2)


def _unguided_audio_negative(request: Request) -> PromptEmbeddings | None:
    """With the audio fixed, the unconditional pass sees the prompt's audio context (the reference's
    audio guider has no negative context)."""
    if request.negative is None:
        return None
    return PromptEmbeddings(request.negative.video, request.prompt.audio)


def _timed(timings: dict[str, float], phase: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
    """`fn(*args, **kwargs)`, waited for, its wall seconds added to `timings[phase]`."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start
    return out


def _stage(
    components: Components,
    request: Request,
    stage: Stage,
    key: jax.Array,
    initial: Latents,
    audio_reference: np.ndarray | None = None,
) -> Latents:
    shape = stage_pixels(request, stage.downscale)
    video_conditionings = [
        *_image_conditionings(components, request.images, shape, keyframes_only=stage.images == "keyframes"),
        *_reference_conditionings(components, request.reference_videos if stage.references else (), shape, request),
    ]
    audio_conditionings = [keep_all] if stage.fixed_audio else []
    if audio_reference is not None:
        audio_conditionings.append(functools.partial(condition_by_audio_reference, latent=audio_reference))
    if stage.regenerate_span:
        span = functools.partial(
            regenerate_time_span, start_time=request.retake.start_time, end_time=request.retake.end_time
        )
        if not stage.frozen_video:
            video_conditionings.append(span)
        if initial[1] is not None and not stage.frozen_audio:
            audio_conditionings.append(span)
    return denoise_audio_video(
        stage_transformer(components, stage),
        shape,
        np.asarray(stage.sigmas, np.float32),
        key,
        request.prompt,
        geometry=components.geometry,
        dtype=components.dtype,
        guidance=stage.guidance,
        negative=_unguided_audio_negative(request) if stage.fixed_audio else request.negative,
        conditionings=video_conditionings,
        initial_video_latent=None if initial[0] is None else np.asarray(initial[0]),
        initial_audio_latent=None if initial[1] is None else np.asarray(initial[1]),
        noise_scale=stage.noise_scale,
        max_batch_size=request.max_batch_size,
        description=stage.description,
        sampler=stage.sampler,
        audio_conditionings=audio_conditionings,
        frozen=(stage.frozen_video, stage.frozen_audio or stage.fixed_audio),
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
