"""What a flow is asked for and what it calls: conditioning inputs, `Components`, `Request`, and the
checks a request passes before any device work (each reading what the flow takes from its `Flow`).

Every check raises `ValueError`/`TypeError` naming the argument, its value and the fix.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.pipeline.denoisers import Forward
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF, LTX_2_4_IMAGE_CRF
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings

if TYPE_CHECKING:  # the flows' plans take requests: the checks read a given `Flow`, not the registry
    from ltx_jax.pipeline.flows.flow import Flow

MAX_CRF = 51  # libx264's worst quality


@dataclasses.dataclass(frozen=True)
class ImageCondition:
    """The image file `image` placed at pixel frame `frame_idx`, keeping `strength` of it; `crf` is the
    H.264 quality it is compressed at first, as the model's training frames were (0: not compressed; None: the
    model's, `GenerationDefaults.image_crf`, which `GenerationSettings.resolve` fills in)."""

    image: str | os.PathLike
    frame_idx: int
    strength: float
    crf: int | None = None


@dataclasses.dataclass(frozen=True)
class VideoCondition:
    """IC-LoRA's reference video `video` (e.g. a depth or pose video), kept at `strength` (1: exactly)."""

    video: str | os.PathLike
    strength: float = 1.0


@dataclasses.dataclass(frozen=True)
class AudioInput:
    """a2vid's input audio: a `(channels, samples)` float32 waveform in [-1, 1] at `sample_rate` Hz
    (what `audio_files.read_audio` returns), at least as long as the video."""

    waveform: np.ndarray
    sample_rate: int


@dataclasses.dataclass(frozen=True)
class RetakeSpan:
    """retake: the source video `video` whose `[start_time, end_time)` seconds are generated again (in
    its video, its audio, or both), the rest kept."""

    video: str | os.PathLike
    start_time: float
    end_time: float
    regenerate_video: bool = True
    regenerate_audio: bool = True


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
            of its first `frames` frames (IC-LoRA's reference videos, retake's source).
        encode_audio: `(waveform (channels, samples), sample rate)` -> normalized audio latent
            `(1, C, T, M)` (resampled, mel spectrogram, audio VAE encoder: ltx-core's `encode_audio`).
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
    encode_audio: Callable[[np.ndarray, int], jax.Array] | None = None
    reference_downscale_factor: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """One generation. Frames 8k+1; height/width multiples of 32 (64 for the two-stage flows).
    `negative` is the negative prompt's embeddings, needed when a cfg scale of `guidance` is not 1.
    ic-lora: `reference_videos`, `skip_stage_2`, and how much the generated tokens and the references'
    attend to each other: `reference_attention_strength`, times a pixel mask `(1, 1, F, H, W)` in
    [0, 1] over the reference video (`reference_attention_mask`) when given.
    a2vid: `audio`, the input audio the video is generated around (its latent stays fixed).
    retake: `retake`, the source video and the span to generate again (the size and frames are the
    source's); `audio` its audio track (None: it has none, and the whole audio is generated).
    dubit: `reference_videos`, the one reference video, and `audio`, its audio track (the frames and frame
    rate are the video's: `GenerationSettings` reads them).
    `model_version`: the transformer file's, parsed ((2, 5, 0); () unknown), for flows that sample by it
    (distilled: ancestral Euler from 2.5)."""

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
    audio: AudioInput | None = None
    retake: RetakeSpan | None = None
    model_version: tuple[int, ...] = ()


def check_sizes(height: int, width: int, num_frames: int, frame_rate: float, flow: Flow) -> None:
    """Raises `ValueError` naming the size and the fix: the VAE's 32x32x8 compression (64 in space
    for the two-stage flows, whose first stage runs at half the size)."""
    divisor = flow.size_multiple
    for name, value in (("height", height), ("width", width)):
        if value <= 0 or value % divisor:
            raise ValueError(
                f"{name}={value} must be a positive multiple of {divisor} for the {flow.name} flow "
                f"(try {max(divisor, round(value / divisor) * divisor)})."
            )
    if num_frames < 1 or (num_frames - 1) % 8:
        fix = (num_frames - 1) // 8 * 8 + 1
        raise ValueError(f"num_frames={num_frames} must be 8k+1 (e.g. {max(fix, 1)} or {max(fix, 1) + 8}).")
    if frame_rate <= 0:
        raise ValueError(f"frame_rate must be positive, got {frame_rate}.")


def check_images(images: Sequence[ImageCondition], num_frames: int, flow: Flow) -> None:
    if images and not flow.takes_images:
        why = "it makes audio only" if flow.audio_only else "its source video conditions it"
        raise ValueError(f"images (--image): the {flow.name} flow takes none; {why}.")
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
                f"images: crf={image.crf!r} must be an integer in [0, {MAX_CRF}] (H.264's range; the reference's "
                f"default is {DEFAULT_IMAGE_CRF}, {LTX_2_4_IMAGE_CRF} from LTX-2.4 on, which GenerationSettings fills "
                "in for a crf of None; 0 skips the compression)."
            )


def check_audio_only(prompt: PromptEmbeddings, negative: PromptEmbeddings | None, flow: Flow) -> None:
    """An audio-only flow's contexts: the audio's alone (its DiT has no video stream; 1.2.0's t2a passes
    `audio_encoding` only)."""
    if flow.audio_only and any(p is not None and p.video is not None for p in (prompt, negative)):
        raise ValueError(
            f"prompt.video / negative.video: the {flow.name} flow makes audio only; give PromptEmbeddings(None, audio)."
        )


def check_reference_videos(videos: Sequence[VideoCondition], skip_stage_2: bool, flow: Flow) -> None:
    """IC-LoRA's reference videos and `skip_stage_2`: given with the ic-lora flow (at least one video) only;
    dubit's one reference video (`--reference-video`, `--reference-strength`)."""
    if not flow.needs.ic_lora:
        if videos or skip_stage_2:
            given = "reference_videos (--video-conditioning)" if videos else "skip_stage_2 (--skip-stage-2)"
            raise ValueError(f"{given} belongs to the ic-lora flow; the {flow.name} flow does not use it.")
        return
    if flow.needs.audio_input == "reference":
        _check_dubbed_video(videos, skip_stage_2, flow)
        return
    if not videos:
        raise ValueError(
            f"The {flow.name} flow needs at least one reference video: VideoCondition(path, strength) in "
            "reference_videos (--video-conditioning PATH STRENGTH)."
        )
    for video in videos:
        if not isinstance(video, VideoCondition):
            raise TypeError(f"reference_videos must hold VideoCondition(path, strength) entries, got {video!r}.")
        if not 0.0 <= video.strength <= 1.0:
            raise ValueError(f"reference_videos: strength={video.strength} must lie in [0, 1] (1 keeps it exactly).")


def _check_dubbed_video(videos: Sequence[VideoCondition], skip_stage_2: bool, flow: Flow) -> None:
    """dubit: exactly one reference video, kept at a strength in [0, 1]; both stages run."""
    if skip_stage_2:
        raise ValueError(f"skip_stage_2 (--skip-stage-2) belongs to the ic-lora flow; the {flow.name} flow runs both.")
    if len(videos) != 1 or not isinstance(videos[0], VideoCondition):
        raise ValueError(
            f"The {flow.name} flow takes exactly one reference video (--reference-video PATH): "
            f"reference_videos=(VideoCondition(path, strength),), got {tuple(videos)!r}."
        )
    if not 0.0 <= videos[0].strength <= 1.0:
        raise ValueError(f"--reference-strength {videos[0].strength} must lie in [0, 1] (1 keeps the video exactly).")


def check_reference_attention(strength: float, masked: bool, flow: Flow) -> None:
    """ic-lora's attention strength in [0, 1]; it and a mask (`masked`) belong to the ic-lora flow only."""
    if (not flow.needs.ic_lora or flow.needs.audio_input == "reference") and (strength != 1.0 or masked):
        raise ValueError(
            f"The reference attention strength and mask (--conditioning-attention-mask) belong to the ic-lora flow; "
            f"the {flow.name} flow does not use them."
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


def check_retake(span: RetakeSpan | None, num_frames: int, frame_rate: float, flow: Flow) -> None:
    """retake's span: given with the retake flow only; finite, `start < end`, starting inside the video."""
    if not flow.needs.source_video:
        if span is not None:
            raise ValueError(
                f"retake (--video-path, --start-time, --end-time) belongs to the retake flow, not {flow.name}."
            )
        return
    if not isinstance(span, RetakeSpan):
        raise TypeError(f"The {flow.name} flow needs retake=RetakeSpan(video, start_time, end_time), got {span!r}.")
    times = (span.start_time, span.end_time)
    if not all(isinstance(t, numbers.Real) and not isinstance(t, bool) and np.isfinite(t) for t in times):
        raise ValueError(f"retake: --start-time and --end-time must be finite seconds, got {times}.")
    duration = num_frames / frame_rate
    if not 0 <= span.start_time < span.end_time:
        raise ValueError(f"retake: --start-time {span.start_time} must be >= 0 and before --end-time {span.end_time}.")
    if span.start_time >= duration:
        raise ValueError(
            f"retake: --start-time {span.start_time} s is past the source video's end ({num_frames} frames at "
            f"{frame_rate} fps = {duration:.3f} s); choose a span inside it."
        )


def check_audio_input(audio: AudioInput | None, flow: Flow) -> None:
    """a2vid needs the input audio (`AudioInput`), dubit its reference video's, retake may have one (the source's),
    no other flow takes one."""
    if flow.needs.audio_input == "from_source" and audio is None:
        return
    if flow.needs.audio_input is None:
        if audio is not None:
            raise ValueError(f"audio (--audio-path) belongs to the a2vid flow; the {flow.name} flow generates its own.")
        return
    if not isinstance(audio, AudioInput):
        raise TypeError(
            f"The {flow.name} flow takes audio=AudioInput(waveform, sample_rate) (a2vid: --audio-path FILE; dubit: "
            "the --reference-video's track), "
            f"got {audio!r}."
        )
    waveform = np.asarray(audio.waveform)
    if waveform.ndim != 2 or waveform.shape[1] == 0 or not np.all(np.isfinite(waveform)):
        raise ValueError(
            f"audio.waveform must be a finite (channels, samples) array, got shape {waveform.shape}; "
            "read it with ltx_jax.pipeline.audio_files.read_audio."
        )
    if waveform.shape[0] not in (1, 2):  # the audio VAE encodes stereo; mono is duplicated
        raise ValueError(
            f"The input audio has {waveform.shape[0]} channels; the audio VAE takes mono or stereo. Mix it down "
            "first (e.g. ffmpeg -i IN -ac 2 OUT.wav)."
        )
    rate = audio.sample_rate
    if isinstance(rate, bool) or not isinstance(rate, numbers.Integral) or rate <= 0:
        raise ValueError(f"audio.sample_rate must be a positive integer (Hz), got {audio.sample_rate!r}.")
