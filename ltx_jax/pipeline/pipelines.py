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
  stage 2 runs the plain DiT (stage_2_transformer) without them, or is skipped.
The components are callables, so the flows run on any mesh and with any decoder implementation.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.pipeline.conditioning import (
    condition_by_keyframe,
    condition_by_latent_index,
    condition_by_reference_latent,
    downsample_mask_to_latent,
    with_attention_strength,
)
from ltx_jax.pipeline.denoisers import Forward
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES, ltx2_sigmas
from ltx_jax.pipeline.stages import (
    Conditioning,
    Guidance,
    LatentGeometry,
    PromptEmbeddings,
    Sampler,
    denoise_audio_video,
)
from ltx_jax.pipeline.types import LatentState, VideoLatentShape, VideoPixelShape

Flow = Literal["one-stage", "two-stage", "two-stage-hq", "distilled", "keyframe-interpolation", "ic-lora"]
FLOWS: tuple[Flow, ...] = ("one-stage", "two-stage", "two-stage-hq", "distilled", "keyframe-interpolation", "ic-lora")
# The distilled model's fixed sigmas (8 + 3 steps) without guidance: no steps, guidance or negative prompt.
UNGUIDED_FLOWS: tuple[Flow, ...] = ("distilled", "ic-lora")
MAX_CRF = 51  # libx264's worst quality
# Guided stage 1 at half size, then stage 2 with the distilled LoRA: these need `distilled_lora`.
GUIDED_TWO_STAGE_FLOWS: tuple[Flow, ...] = ("two-stage", "two-stage-hq", "keyframe-interpolation")


@dataclasses.dataclass(frozen=True)
class ImageCondition:
    """The image file `image` placed at pixel frame `frame_idx`, keeping `strength` of it; `crf` is the
    H.264 quality it is compressed at first, as the model's training frames were (0: not compressed)."""

    image: str | os.PathLike
    frame_idx: int
    strength: float
    crf: int = DEFAULT_IMAGE_CRF


@dataclasses.dataclass(frozen=True)
class VideoCondition:
    """IC-LoRA's reference video `video` (e.g. a depth or pose video), kept at `strength` (1: exactly)."""

    video: str | os.PathLike
    strength: float = 1.0


@dataclasses.dataclass(frozen=True)
class Components:
    """What a flow calls. `transformer` is the DiT (e.g. `SequenceParallel`); the rest are optional
    where a flow does not need them (`upsample` for two-stage/distilled, `encode_image` for images).

    Attributes:
        transformer: velocity DiT `forward(video, audio, perturbations)`.
        stage_2_transformer: the DiT with the distilled LoRA (two-stage); None: `transformer`.
        upsample: video latent `(B, C, F, H, W)` -> `(B, C, F, 2H, 2W)`, normalized in and out.
        encode_image: `(image file, height, width, crf)` -> latent `(1, C, 1, height/32, width/32)`
            (read, CRF-compressed, resized and encoded as the reference does).
        encode_video: `(video file, height, width, frames)` -> latent `(1, C, F', height/32, width/32)`
            of its first `frames` frames (IC-LoRA's reference videos).
        reference_downscale_factor: the IC-LoRA's: reference videos are encoded at 1/factor of the
            stage's size (from the LoRA file's metadata).
        geometry: latent sizes of the VAEs.
        dtype: latent dtype of the sampler state (the DiT's parameter dtype, as the reference does).
    """

    transformer: Forward
    geometry: LatentGeometry
    dtype: jnp.dtype
    stage_2_transformer: Forward | None = None
    upsample: Callable[[jax.Array], jax.Array] | None = None
    encode_image: Callable[[str | os.PathLike, int, int, int], jax.Array] | None = None
    encode_video: Callable[[str | os.PathLike, int, int, int], jax.Array] | None = None
    reference_downscale_factor: int = 1


@dataclasses.dataclass(frozen=True)
class Request:
    """One generation. Frames 8k+1; height/width multiples of 32 (64 for the two-stage flows).
    `negative` is the negative prompt's embeddings, needed when a cfg scale of `guidance` is not 1.
    ic-lora: `reference_videos`, `skip_stage_2`, and how much the generated tokens and the references'
    attend to each other: `reference_attention_strength`, times a pixel mask `(1, 1, F, H, W)` in
    [0, 1] over the reference video (`reference_attention_mask`) when given."""

    prompt: PromptEmbeddings
    height: int
    width: int
    num_frames: int
    frame_rate: float
    seed: int
    num_inference_steps: int = 30
    guidance: Guidance = Guidance()
    negative: PromptEmbeddings | None = None
    images: tuple[ImageCondition, ...] = ()
    max_batch_size: int | None = None
    reference_videos: tuple[VideoCondition, ...] = ()
    skip_stage_2: bool = False
    reference_attention_strength: float = 1.0
    reference_attention_mask: np.ndarray | None = None


def check_flow(flow: str) -> None:
    if flow not in FLOWS:
        raise ValueError(f"flow must be one of {list(FLOWS)}, got {flow!r}.")


def check_sizes(height: int, width: int, num_frames: int, frame_rate: float, flow: Flow) -> None:
    """Raises `ValueError` naming the size and the fix: the VAE's 32x32x8 compression (64 in space
    for the two-stage flows, whose first stage runs at half the size)."""
    divisor = 32 if flow == "one-stage" else 64
    for name, value in (("height", height), ("width", width)):
        if value <= 0 or value % divisor:
            raise ValueError(
                f"{name}={value} must be a positive multiple of {divisor} for the {flow} flow "
                f"(try {max(divisor, round(value / divisor) * divisor)})."
            )
    if num_frames < 1 or (num_frames - 1) % 8:
        fix = (num_frames - 1) // 8 * 8 + 1
        raise ValueError(f"num_frames={num_frames} must be 8k+1 (e.g. {max(fix, 1)} or {max(fix, 1) + 8}).")
    if frame_rate <= 0:
        raise ValueError(f"frame_rate must be positive, got {frame_rate}.")


def check_images(images: Sequence[ImageCondition], num_frames: int) -> None:
    for image in images:
        if not isinstance(image, ImageCondition):
            raise TypeError(f"images must hold ImageCondition(path, frame_idx, strength) entries, got {image!r}.")
        if not 0 <= image.frame_idx < num_frames:
            raise ValueError(
                f"images: frame_idx={image.frame_idx} is outside the {num_frames} frames (0 to {num_frames - 1})."
            )
        if not 0.0 <= image.strength <= 1.0:
            raise ValueError(f"images: strength={image.strength} must lie in [0, 1] (1 keeps the image exactly).")
        if not isinstance(image.crf, int) or not 0 <= image.crf <= MAX_CRF:
            raise ValueError(
                f"images: crf={image.crf!r} must be an integer in [0, {MAX_CRF}] (H.264's range; "
                f"{DEFAULT_IMAGE_CRF} is the reference's default, 0 skips the compression)."
            )


def check_reference_videos(videos: Sequence[VideoCondition], skip_stage_2: bool, flow: Flow) -> None:
    """IC-LoRA's reference videos and `skip_stage_2`: given with the ic-lora flow (at least one video) only."""
    if flow != "ic-lora":
        if videos or skip_stage_2:
            given = "reference_videos (--video-conditioning)" if videos else "skip_stage_2 (--skip-stage-2)"
            raise ValueError(f"{given} belongs to the ic-lora flow; the {flow} flow does not use it.")
        return
    if not videos:
        raise ValueError(
            "The ic-lora flow needs at least one reference video: VideoCondition(path, strength) in "
            "reference_videos (--video-conditioning PATH STRENGTH)."
        )
    for video in videos:
        if not isinstance(video, VideoCondition):
            raise TypeError(f"reference_videos must hold VideoCondition(path, strength) entries, got {video!r}.")
        if not 0.0 <= video.strength <= 1.0:
            raise ValueError(f"reference_videos: strength={video.strength} must lie in [0, 1] (1 keeps it exactly).")


def check_reference_attention(strength: float, masked: bool, flow: Flow) -> None:
    """ic-lora's attention strength in [0, 1]; it and a mask (`masked`) belong to the ic-lora flow only."""
    if flow != "ic-lora" and (strength != 1.0 or masked):
        raise ValueError(
            f"The reference attention strength and mask (--conditioning-attention-mask) belong to the ic-lora flow; "
            f"the {flow} flow does not use them."
        )
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"reference_attention_strength={strength} must lie in [0, 1] (1: full attention).")


def check_attention_mask(mask: np.ndarray | None) -> None:
    """ic-lora's optional pixel mask: `(1, 1, F, H, W)` weights in [0, 1]."""
    if mask is not None:
        mask = np.asarray(mask)
        if mask.ndim != 5 or mask.shape[:2] != (1, 1) or not np.all((mask >= 0) & (mask <= 1)):
            raise ValueError(
                "reference_attention_mask must be a (1, 1, F, H, W) array of weights in [0, 1]; "
                f"got shape {mask.shape} and values in [{mask.min()}, {mask.max()}]."
            )


def validate(request: Request, flow: Flow) -> None:
    """Raises before any device work, naming the argument and the fix."""
    check_flow(flow)
    check_sizes(request.height, request.width, request.num_frames, request.frame_rate, flow)
    check_images(request.images, request.num_frames)
    check_reference_videos(request.reference_videos, request.skip_stage_2, flow)
    check_reference_attention(request.reference_attention_strength, request.reference_attention_mask is not None, flow)
    check_attention_mask(request.reference_attention_mask)
    if flow not in UNGUIDED_FLOWS and request.guidance.needs_negative_prompt() and request.negative is None:
        raise ValueError(
            "A cfg scale != 1 needs the negative prompt's embeddings (Request.negative); pass them, or set both "
            "cfg scales to 1."
        )


def generate(
    components: Components, request: Request, flow: Flow, timings: dict[str, float] | None = None
) -> tuple[jax.Array | None, jax.Array | None]:
    """Runs `flow`; returns the final video latent `(B, C, F, H, W)` and audio latent `(B, C, T, M)`.
    With `timings`, a two-stage flow adds the wall seconds of "stage_1_denoising", "upsampling" and
    "stage_2_denoising" to it."""
    validate(request, flow)
    key = jax.random.key(request.seed)
    if flow == "one-stage":
        sigmas = ltx2_sigmas(request.num_inference_steps)
        return _stage(components, request, 1, sigmas, key, request.guidance, "denoising")
    guided = flow in GUIDED_TWO_STAGE_FLOWS
    if components.upsample is None and not request.skip_stage_2:
        raise ValueError(f"The {flow} flow needs the spatial upsampler (components.upsample).")
    stage_1_sigmas = _stage_1_sigmas(components, request, flow)
    guidance = request.guidance if guided else Guidance()
    options = {
        "keyframes_only": flow == "keyframe-interpolation",
        "sampler": "res2s" if flow == "two-stage-hq" else "euler",
    }
    timed = functools.partial(_timed, {} if timings is None else timings)
    video, audio = timed(
        "stage_1_denoising", _stage, components, request, 2, stage_1_sigmas, key, guidance, "stage 1", **options,
        references=request.reference_videos,
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


def _stage_1_sigmas(components: Components, request: Request, flow: Flow) -> np.ndarray:
    """The distilled sigmas, or `ltx2_sigmas` shifted for 4,096 tokens (the reference's default), or
    for HQ for the stage-1 latent's own token count (its scheduler is given the latent)."""
    if flow in UNGUIDED_FLOWS:
        return np.asarray(DISTILLED_SIGMA_VALUES)
    if flow != "two-stage-hq":
        return ltx2_sigmas(request.num_inference_steps)
    half = VideoPixelShape(1, request.num_frames, request.height // 2, request.width // 2, request.frame_rate)
    return ltx2_sigmas(request.num_inference_steps, tokens=components.geometry.video(half).token_count())


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
) -> tuple[jax.Array | None, jax.Array | None]:
    shape = VideoPixelShape(
        1, request.num_frames, request.height // downscale, request.width // downscale, request.frame_rate
    )
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
        ],
        initial_video_latent=None if initial[0] is None else np.asarray(initial[0]),
        initial_audio_latent=None if initial[1] is None else np.asarray(initial[1]),
        noise_scale=noise_scale,
        max_batch_size=request.max_batch_size,
        description=description,
        sampler=sampler,
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
