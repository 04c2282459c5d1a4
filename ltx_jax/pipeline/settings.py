"""A generation's arguments besides the prompt (`GenerationSettings`), resolved against a flow's
defaults (`ltx_jax.pipeline.defaults`) and checked once, before any device work."""

from __future__ import annotations

import dataclasses
import math
import numbers
import os

from ltx_jax.pipeline import flows
from ltx_jax.pipeline.audio_files import MAX_CHANNELS, audio_channels, audio_duration, check_audio_file
from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.duration import DEFAULT_AUTO_DURATION, most_frames
from ltx_jax.pipeline.flows import Flow
from ltx_jax.pipeline.flows.flow import AUDIO_ONLY_SIZE, audio_only_guidance
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.images import check_image_readable
from ltx_jax.pipeline.requests import (
    ImageCondition,
    RetakeSpan,
    VideoCondition,
    check_images,
    check_reference_attention,
    check_reference_videos,
    check_retake,
    check_sizes,
)
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import Guidance
from ltx_jax.pipeline.video_files import video_metadata


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationSettings:
    """One generation's arguments besides the prompt; None takes the pipeline's default.

    Attributes:
        height, width: pixels; multiples of 32 (64 for the two-stage flows); t2a: a placeholder, left unset.
        num_frames: 8k + 1 frames.
        frame_rate: frames per second (also sets the audio's length).
        num_inference_steps: steps of the (first) stage; the distilled flow's sigmas are fixed.
        seed: the noise (the same seed gives the same video on any mesh).
        images: conditioning images.
        guidance: per-modality guidance (`Guidance(MultiModalGuiderParams(...), ...)`); the distilled
            and ic-lora flows run without.
        reference_videos: the ic-lora flow's reference videos (`VideoCondition(path, strength)`).
        skip_stage_2: the ic-lora flow only: decode stage 1's half-size result.
        reference_attention_strength: ic-lora: how much generated and reference tokens attend to each
            other (1: fully), times `attention_mask_video` (a grayscale video over the reference's
            frames, white = 1) where given.
        audio_path: a2vid: the audio file (wav, mp3, m4a, or a video's audio track) the video is
            generated around; it is also the output's audio track.
        audio_start_time, audio_max_duration: a2vid: seconds into the file to start at, and how many
            to read (None: the video's duration, num_frames / frame_rate).
        retake: the retake flow's source video and span (`RetakeSpan`); the size, frames and frame
            rate are the source's (leave them unset).
        (dubit: `reference_videos` holds its one reference video, whose frames (8k+1, rounded down) and
            frame rate the generation takes (leave them unset), and whose audio track it dubs.)
        enhance_prompt: Gemma 3 rewrites the (text) prompt first, as ltx-pipelines' `--enhance-prompt`
            does, seeing the first conditioning image where there is one; seeded by `seed`.
        auto_duration: `(min, max)` seconds: instead of `num_frames` (which stays None), the frame count the
            model's duration head predicts from the encoded prompt, within them (LTX-2.5, `--auto-duration`;
            1.2.0's `AutoDuration`). The checks here see the most frames the bounds allow; the pipeline
            resolves the settings again with the predicted count.
    """

    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    frame_rate: float | None = None
    num_inference_steps: int | None = None
    seed: int | None = None
    images: tuple[ImageCondition, ...] = ()
    guidance: Guidance | None = None
    reference_videos: tuple[VideoCondition, ...] = ()
    skip_stage_2: bool = False
    reference_attention_strength: float = 1.0
    attention_mask_video: str | os.PathLike | None = None
    audio_path: str | os.PathLike | None = None
    audio_start_time: float = 0.0
    audio_max_duration: float | None = None
    retake: RetakeSpan | None = None
    enhance_prompt: bool = False
    auto_duration: tuple[float, float] | None = None
    # What these settings were resolved for (flow name, defaults); not an argument, and `replace` drops it.
    _resolved_for: tuple[str, GenerationDefaults] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def resolve(self, defaults: GenerationDefaults, flow: str | Flow) -> GenerationSettings:
        """Every None replaced by its default, checked for `flow`. Raises `ValueError`/`TypeError`
        naming the argument, its value and the fix; reads the headers of the files named (images, the
        a2vid audio, retake's source video), not the models. Settings it returned are returned as they
        are for the same flow and defaults: the checks run once."""
        flow = flows.get(flow)
        if self._resolved_for == (flow.name, defaults):
            return self
        distilled = not flow.guided
        given_distilled = (  # each with what resolving gives it, so that resolved settings resolve again
            ("num_inference_steps (--num-inference-steps)", self.num_inference_steps, len(DISTILLED_SIGMA_VALUES) - 1),
            ("guidance (the --video-*/--audio-* guidance flags)", self.guidance, Guidance()),
        )
        for name, value, fixed in given_distilled:
            if distilled and value is not None and value != fixed:
                raise ValueError(
                    f"{name} given: the {flow.name} flow runs fixed sigmas without guidance; leave it unset, or "
                    f"use the {' or '.join(_guided_alternatives(flow))} flow."
                )
        given = {field: getattr(self, field) for field in _DEFAULTED}
        if flow.needs.source_video:
            given.update(_source_size(self.retake, given))
        if flow.needs.audio_input == "reference":
            given.update(_reference_timing(self.reference_videos, given))
        if flow.audio_only:
            given.update(_audio_only_size(given, flow))
        if self.auto_duration is not None:
            given["num_frames"] = _auto_duration_frames(self.auto_duration, self.num_frames, given, defaults, flow)
        resolved = dataclasses.replace(
            self,
            **{field: _or(value, getattr(defaults, field)) for field, value in given.items()},
            images=tuple(_with_crf(image, defaults.image_crf) for image in self.images),
            guidance=Guidance() if distilled else _flow_guidance(_or(self.guidance, defaults.guidance), defaults, flow),
            reference_videos=tuple(self.reference_videos),
        )
        frames, fps = resolved.num_frames, resolved.frame_rate
        reads_audio = flow.needs.audio_input == "required"
        if reads_audio and self.audio_max_duration is None and _is_number(frames) and _is_number(fps) and fps > 0:
            # the video's duration; values it cannot be computed from are left for `_check` to name
            resolved = dataclasses.replace(resolved, audio_max_duration=frames / fps)
        if distilled:
            resolved = dataclasses.replace(resolved, num_inference_steps=len(DISTILLED_SIGMA_VALUES) - 1)
        resolved._check(flow)
        if self.auto_duration is not None:  # the pipeline predicts it once the prompt is encoded
            resolved = dataclasses.replace(resolved, num_frames=None)
        object.__setattr__(resolved, "_resolved_for", (flow.name, defaults))
        return resolved

    def with_duration_head(self, flow: str | Flow, has_head: bool) -> GenerationSettings:
        """These settings with the frame count left to the model's duration head where `has_head`, num_frames is
        left out and `flow` lets the head choose (1.2.0's default `AutoDuration`, 1 to 20 s); `auto_duration`
        without a head is refused by name."""
        if self.auto_duration is not None and not has_head:
            raise ValueError(
                "auto_duration (--auto-duration) needs LTX-2.5's duration head: pass duration_head_path "
                "(--duration-head-path), or give num_frames."
            )
        chosen = self.num_frames is not None or self.auto_duration is not None
        if not has_head or chosen or not flows.get(flow).auto_duration:
            return self
        return dataclasses.replace(self, auto_duration=DEFAULT_AUTO_DURATION)

    def without_prompt_enhancement(self) -> GenerationSettings:
        """These settings with `enhance_prompt` off (the prompts were enhanced ahead), resolved as these are."""
        plain = dataclasses.replace(self, enhance_prompt=False)
        object.__setattr__(plain, "_resolved_for", self._resolved_for)
        return plain

    def _check(self, flow: Flow) -> None:
        for name in ("height", "width", "num_frames", "num_inference_steps", "seed"):
            _check_integer(name, getattr(self, name))
        if not isinstance(self.frame_rate, numbers.Real) or not math.isfinite(self.frame_rate):
            raise ValueError(f"frame_rate must be a finite number of frames per second, got {self.frame_rate!r}.")
        check_sizes(self.height, self.width, self.num_frames, self.frame_rate, flow)
        if not isinstance(self.enhance_prompt, bool):
            raise TypeError(f"enhance_prompt must be True or False, got {self.enhance_prompt!r}.")
        if self.num_inference_steps < 2:
            raise ValueError(f"num_inference_steps={self.num_inference_steps} must be at least 2 (e.g. 30).")
        if not isinstance(self.guidance, Guidance):
            raise TypeError(
                f"guidance must be a Guidance(video=MultiModalGuiderParams(...), audio=...), got {self.guidance!r}."
            )
        check_images(self.images, self.num_frames, flow)
        for image in self.images:
            if not os.path.isfile(image.image):
                raise FileNotFoundError(f"images: the conditioning image {os.fspath(image.image)!r} does not exist.")
            check_image_readable(image.image)
        check_reference_videos(self.reference_videos, self.skip_stage_2, flow)
        check_reference_attention(self.reference_attention_strength, self.attention_mask_video is not None, flow)
        named = [("reference_videos", video.video) for video in self.reference_videos]
        if self.attention_mask_video is not None:
            named.append(("attention_mask_video", self.attention_mask_video))
        for name, path in named:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{name}: {os.fspath(path)!r} does not exist.")
            fps, frames, _, _ = video_metadata(path, frame_cap=self.num_frames)
            if abs(fps - self.frame_rate) > FPS_TOLERANCE * self.frame_rate:  # its frames would land at other times
                raise ValueError(
                    f"{name}: {os.fspath(path)!r} runs at {fps:g} fps and the generation at {self.frame_rate:g}; "
                    f"re-encode it at {self.frame_rate:g} fps, or generate at --frame-rate {fps:g}."
                )
            # the first num_frames frames are read; the VAE encodes 8k+1 (load_video_conditioning)
            frames = min(frames, self.num_frames)
            if (frames - 1) % 8:
                raise ValueError(
                    f"{name}: {os.fspath(path)!r} gives {frames} frames of the {self.num_frames} requested; the VAE "
                    f"encodes 8k+1: use a video of at least {self.num_frames} frames, or generate "
                    f"{(frames - 1) // 8 * 8 + 1}."
                )
        self._check_audio(flow)
        check_retake(self.retake, self.num_frames, self.frame_rate, flow)

    def _check_audio(self, flow: Flow) -> None:
        """a2vid's audio file: given (only) for a2vid, readable, and covering the video from the start time."""
        if flow.needs.audio_input != "required":
            given = [flag for flag, value, default in (
                ("--audio-path", self.audio_path, None), ("--audio-start-time", self.audio_start_time, 0.0),
                ("--audio-max-duration", self.audio_max_duration, None)) if value != default]  # fmt: skip
            if given:
                raise ValueError(
                    f"{', '.join(given)}: these belong to the a2vid flow; the {flow.name} flow makes its own."
                )
            return
        if self.audio_path is None:
            raise ValueError(
                f"The {flow.name} flow needs audio_path (--audio-path FILE): the audio to generate a video for."
            )
        video_seconds = self.num_frames / self.frame_rate
        # The encoder makes ceil((1 + samples_16k // 160) / 4) latent frames: F of them need (F - 1) * 40 ms.
        needed = (round(video_seconds / AUDIO_LATENT_SECONDS) - 1) * AUDIO_LATENT_SECONDS
        if _is_number(self.audio_max_duration) and self.audio_max_duration < needed:
            raise ValueError(
                f"audio_max_duration (--audio-max-duration) {self.audio_max_duration} s is shorter than the video "
                f"({self.num_frames} frames at {self.frame_rate} fps = {video_seconds:.3f} s); give at least "
                f"{video_seconds:.3f}, or leave it unset."
            )
        check_audio_file(self.audio_path, self.audio_start_time, self.audio_max_duration)
        available = audio_duration(self.audio_path) - self.audio_start_time
        if available < needed:
            raise ValueError(
                f"audio_path (--audio-path) {os.fspath(self.audio_path)!r} has {available:.3f} s of audio after "
                f"--audio-start-time {self.audio_start_time}; the video ({self.num_frames} frames at "
                f"{self.frame_rate} fps) lasts {video_seconds:.3f} s. Use a longer audio, an earlier start, or "
                f"fewer frames (e.g. --num-frames {max(1, int(available * self.frame_rate) // 8 * 8 + 1)})."
            )


FPS_TOLERANCE = 0.01  # a conditioning video's frame rate within 1% of the generation's
AUDIO_LATENT_SECONDS = 0.04  # one audio latent frame: 4 mel frames of 160 samples at 16 kHz
_DEFAULTED = ("height", "width", "num_frames", "frame_rate", "num_inference_steps", "seed")


def _auto_duration_frames(
    bounds: object, num_frames: object, given: dict[str, object], defaults: GenerationDefaults, flow: Flow
) -> object:
    """`auto_duration` checked; the most frames it allows, for the checks before the prediction (a frame rate
    that is not a positive number is left for `_check` to name)."""
    if not (isinstance(bounds, tuple | list) and len(bounds) == 2 and all(_is_number(s) and s > 0 for s in bounds)):
        raise ValueError(f"auto_duration (--auto-duration MIN MAX) must be two positive seconds, got {bounds!r}.")
    if bounds[0] > bounds[1]:
        raise ValueError(f"auto_duration (--auto-duration MIN MAX): the minimum {bounds[0]} s is above the maximum.")
    if num_frames is not None:
        raise ValueError("num_frames (--num-frames) and auto_duration (--auto-duration) both given: keep one.")
    if not flow.auto_duration:
        users = [name for name in flows.names() if flows.get(name).auto_duration]
        raise ValueError(
            f"auto_duration (--auto-duration) applies to the {', '.join(users)} flows; give the {flow.name} flow "
            "num_frames."
        )
    frame_rate = _or(given["frame_rate"], defaults.frame_rate)
    if not (_is_number(frame_rate) and math.isfinite(frame_rate) and frame_rate > 0):
        return defaults.num_frames
    return most_frames((float(bounds[0]), float(bounds[1])), frame_rate)


def _guided_alternatives(flow: flows.Flow) -> list[str]:
    """The guided flows that need what `flow` needs (retake: retake-guided), else one-stage and two-stage."""
    same = [name for name in flows.names() if flows.get(name).guided and flows.get(name).needs == flow.needs]
    return same or ["one-stage", "two-stage"]


def _or(value: object, default: object) -> object:
    return default if value is None else value


def _source_size(span: RetakeSpan | None, given: dict[str, object]) -> dict[str, object]:
    """retake generates at its source video's size, frames and frame rate (`get_videostream_metadata`)."""
    fixed = [name for name in ("height", "width", "num_frames", "frame_rate") if given[name] is not None]
    if fixed:
        raise ValueError(
            f"{', '.join(fixed)}: the retake flow keeps its source video's size, frames and frame rate; "
            "leave them unset."
        )
    if not isinstance(span, RetakeSpan):
        raise TypeError(
            "The retake flow needs retake=RetakeSpan(video, start_time, end_time) (--video-path, --start-time, "
            f"--end-time), got {span!r}."
        )
    if not os.path.isfile(span.video):
        raise FileNotFoundError(f"retake: the source video (--video-path) {os.fspath(span.video)!r} does not exist.")
    fps, frames, width, height = video_metadata(span.video)
    if (frames - 1) % 8 or width % 32 or height % 32:
        raise ValueError(
            f"retake: the source video (--video-path) {os.fspath(span.video)!r} is {width}x{height} with {frames} "
            "frames; the VAE takes 8k+1 frames and sizes that are multiples of 32 (ltx-pipelines' retake asks the "
            f"same): cut it to {(frames - 1) // 8 * 8 + 1} frames and {width // 32 * 32}x{height // 32 * 32} first."
        )
    if audio_channels(span.video) > MAX_CHANNELS:
        raise ValueError(
            f"retake: the source video (--video-path) {os.fspath(span.video)!r} has "
            f"{audio_channels(span.video)} audio channels; the audio VAE takes mono or stereo. Mix its audio down "
            "first (e.g. ffmpeg -i IN -c:v copy -ac 2 OUT.mp4)."
        )
    return {"height": height, "width": width, "num_frames": frames, "frame_rate": fps}


def _reference_timing(videos: tuple[VideoCondition, ...], given: dict[str, object]) -> dict[str, object]:
    """dubit generates its reference video's frames, rounded down to 8k+1 (`snap_frames_to_grid`), at its frame
    rate (`get_videostream_metadata`), and dubs its audio track, which it must have (`DubItPipeline` refuses one
    without). Checks the file's headers; a count of videos other than one is left for `check_reference_videos`.
    A frame count or rate given must be the reference's (resolved settings resolve again)."""
    if len(videos) != 1 or not isinstance(videos[0], VideoCondition):
        return {}
    path = os.fspath(videos[0].video)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--reference-video {path!r} does not exist.")
    try:
        fps, frames, _, _ = video_metadata(path)
        channels = audio_channels(path)
        seconds = audio_duration(path) if channels else 0.0
    except ValueError as error:
        raise ValueError(f"--reference-video {path!r} cannot be read: {error}") from None
    if frames < 1:
        raise ValueError(f"--reference-video {path!r} has no video frames: give a video of at least one frame.")
    if not channels or seconds <= 0:
        raise ValueError(
            f"--reference-video {path!r} has no audio{' track' if not channels else ''}: Dub-It needs the speech to "
            "dub; add one (e.g. ffmpeg -i VIDEO -i AUDIO -map 0:v -map 1:a -c:v copy OUT.mp4)."
        )
    if channels > MAX_CHANNELS:
        raise ValueError(
            f"--reference-video {path!r} has {channels} audio channels; the audio VAE takes mono or stereo. Mix its "
            "audio down first (e.g. ffmpeg -i IN -c:v copy -ac 2 OUT.mp4)."
        )
    timing = {"num_frames": (frames - 1) // 8 * 8 + 1, "frame_rate": fps}
    if fixed := [f"{name} (--{name.replace('_', '-')})" for name in timing if given[name] not in (None, timing[name])]:
        raise ValueError(
            f"{', '.join(fixed)}: the dubit flow takes its reference video's frames and frame rate; leave them unset."
        )
    return timing


def _audio_only_size(given: dict[str, object], flow: Flow) -> dict[str, object]:
    """An audio-only flow has no picture: its height and width are a placeholder (`AUDIO_ONLY_SIZE`), refused when
    given otherwise (1.2.0's t2a command has no --height or --width; resolved settings resolve again)."""
    fixed = [f"{name} (--{name})" for name in ("height", "width") if given[name] not in (None, AUDIO_ONLY_SIZE)]
    if fixed:
        raise ValueError(
            f"{', '.join(fixed)}: the {flow.name} flow makes audio only, whose length --num-frames and --frame-rate "
            "set; leave them unset."
        )
    return {"height": AUDIO_ONLY_SIZE, "width": AUDIO_ONLY_SIZE}


def _flow_guidance(guidance: object, defaults: GenerationDefaults, flow: Flow) -> object:
    """An audio-only flow's guidance: the audio's, its modality scale 1 (`audio_only_guidance`); a video guidance
    given to it, other than none or the defaults' (which it leaves), is refused (anything but a `Guidance` is left
    for `_check` to name)."""
    if not flow.audio_only or not isinstance(guidance, Guidance):
        return guidance
    if guidance.video not in (MultiModalGuiderParams(), defaults.guidance.video):
        raise ValueError(
            f"guidance.video (the --video-* guidance flags): the {flow.name} flow makes no video; give "
            "Guidance(audio=MultiModalGuiderParams(...)) alone (the --audio-* flags)."
        )
    return audio_only_guidance(guidance)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_integer(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__}).")


def _with_crf(image: object, crf: int) -> object:
    """`image` with the model's default CRF where it gives None (anything else is left for `check_images`)."""
    if isinstance(image, ImageCondition) and image.crf is None:
        return dataclasses.replace(image, crf=crf)
    return image
