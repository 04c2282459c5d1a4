"""A request's fields -> the `GenerationSettings` `ltx-jax generate` builds from its flags, resolved against the
served pipeline's defaults and checked by the same code (`GenerationSettings.resolve`), then against the server's
limits. Whatever fails is a `RequestError`: HTTP 400 with the settings' own message and the API field it names,
before anything is queued.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path

from ltx_jax.pipeline import flows
from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.duration import snap_frames_to_grid
from ltx_jax.pipeline.flows import Flow
from ltx_jax.pipeline.requests import ImageCondition
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.stages import Guidance
from ltx_jax.serve.schema import GuidanceFields, VideoRequest

MiB = 2**20
# The setting a message of `GenerationSettings.resolve` opens with -> the API field that sets it.
SETTING_FIELDS = {
    "height": "size",
    "width": "size",
    "num_frames": "num_frames",
    "frame_rate": "fps",
    "num_inference_steps": "num_inference_steps",
    "seed": "seed",
    "images": "input_reference",
    "guidance": "guidance",
}
_SIZE = re.compile(r"(\d+)x(\d+)")


class RequestError(ValueError):
    """A request refused before it is queued: the HTTP `status`, the API field at fault (`param`) and why."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limits:
    """The most one request may ask for, and the queue's length (`ltx-jax serve --max-*`)."""

    max_queue: int = 32
    max_frames: int = 257
    max_pixels: int = 1920 * 1088
    max_upload_bytes: int = 20 * MiB

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{field.name} must be a positive integer, got {value!r}.")


DEFAULT_LIMITS = Limits()


@dataclasses.dataclass(frozen=True)
class Served:
    """What the server runs: its model's id (`GET /v1/models`), its flow and the flow's defaults."""

    model: str
    flow: Flow
    defaults: GenerationDefaults


@dataclasses.dataclass(frozen=True)
class Submission:
    """A checked request: the arguments of `LTXPipeline.generate`, its settings resolved."""

    prompt: str
    negative_prompt: str | None
    settings: GenerationSettings


def servable(flow: Flow) -> bool:
    """Whether a request's fields give `flow` all it takes: not reference videos (ic-lora), an input audio (a2vid)
    or a source video (retake), which the API has no fields for yet; and whether it makes the video the API returns
    (not audio alone: t2a)."""
    needs = flow.needs
    return not (needs.ic_lora or needs.audio_input == "required" or needs.source_video or flow.audio_only)


def check_servable(flow: Flow) -> None:
    if not servable(flow):
        names = [name for name in flows.names() if servable(flows.get(name))]
        raise ValueError(
            f"ltx-jax serve cannot run the {flow.name} flow yet: its requests would need inputs the API has no field "
            f"for, or it makes no video. Serve one of {', '.join(names)} (--pipeline)."
        )


def checked(request: VideoRequest, served: Served, limits: Limits, image: Path | None = None) -> Submission:
    """`request` (with the uploaded conditioning image saved at `image`) as the pipeline's arguments, checked as
    `ltx-jax generate` checks its flags, then against `limits`; raises `RequestError` naming the field."""
    for field, value, served_value in (
        ("model", request.model, served.model),
        ("flow", request.flow, served.flow.name),
    ):
        if value is not None and value != served_value:
            raise RequestError(
                f"{field} {value!r}: this server runs {served_value!r} (GET /v1/models); leave {field} out or "
                f"give {served_value!r}.",
                param=field,
            )
    width, height = _size(request.size)
    fps = request.fps if request.fps is not None else served.defaults.frame_rate
    settings = GenerationSettings(
        height=height,
        width=width,
        num_frames=_frames(request, fps),
        frame_rate=request.fps,
        num_inference_steps=request.num_inference_steps,
        seed=request.seed,
        images=() if image is None else (ImageCondition(image, 0, 1.0),),
        guidance=_guidance(request.guidance, served.defaults.guidance),
    )
    try:
        settings = settings.resolve(served.defaults, served.flow)
    except (ValueError, TypeError, FileNotFoundError) as error:
        # the server's file names are nothing the client gave: the message names the upload as the client did
        message = str(error) if image is None else str(error).replace(repr(os.fspath(image)), "input_reference")
        raise RequestError(message, param=_field_of(message, request)) from None
    _check_limits(settings, request, limits)
    return Submission(request.prompt, request.negative_prompt, settings)


def checker(served: Served, limits: Limits) -> Callable[[VideoRequest, Path | None], Submission]:
    """`checked` for `served` and `limits`: the job store's check (and, under `jax.distributed`, the followers')."""
    return lambda request, image: checked(request, served, limits, image)


def _size(size: str | None) -> tuple[int | None, int | None]:
    if size is None:
        return None, None
    match = _SIZE.fullmatch(size.strip())
    if match is None:
        raise RequestError(f"size {size!r} must be WIDTHxHEIGHT in pixels, e.g. '768x512'.", param="size")
    return int(match[1]), int(match[2])


def _frames(request: VideoRequest, fps: float) -> int | None:
    """num_frames, or `seconds` at `fps` rounded down to the VAE's 8k+1 frames."""
    if request.seconds is None or not fps > 0:  # a frame rate that is no rate is for the settings' checks to name
        return request.num_frames
    if request.num_frames is not None:
        raise RequestError("seconds and num_frames both given: give one (num_frames: 8k+1 frames).", param="seconds")
    frames = round(request.seconds * fps)
    if frames < 1:
        raise RequestError(
            f"seconds={request.seconds} at {fps:g} fps is no frame; give at least {1 / fps:.3f} s.", param="seconds"
        )
    return snap_frames_to_grid(frames)


def _guidance(fields: GuidanceFields | None, defaults: Guidance) -> Guidance | None:
    """The fields given over the flow's defaults, as the CLI's guidance flags are; None when none is given."""
    given = {
        modality: stream.model_dump(exclude_none=True)
        for modality in ("video", "audio")
        if (stream := getattr(fields, modality, None)) is not None
    }
    if not any(given.values()):
        return None
    try:
        streams = [dataclasses.replace(getattr(defaults, m), **given.get(m, {})) for m in ("video", "audio")]
    except ValueError as error:
        raise RequestError(f"guidance: {error}", param="guidance") from None
    return Guidance(*streams)


def _field_of(message: str, request: VideoRequest) -> str | None:
    """The API field a settings message names first (num_frames is `seconds` where the request gave that)."""
    match = re.match(r"\w+", message)
    field = SETTING_FIELDS.get(match[0]) if match else None
    return "seconds" if field == "num_frames" and request.seconds is not None else field


def _check_limits(settings: GenerationSettings, request: VideoRequest, limits: Limits) -> None:
    pixels = settings.width * settings.height
    if pixels > limits.max_pixels:
        raise RequestError(
            f"size {settings.width}x{settings.height} is {pixels} pixels, above this server's {limits.max_pixels} "
            "(ltx-jax serve --max-pixels); ask for a smaller size.",
            param="size",
        )
    if settings.num_frames > limits.max_frames:
        raise RequestError(
            f"num_frames={settings.num_frames} is above this server's {limits.max_frames} (ltx-jax serve "
            "--max-frames); ask for fewer frames or seconds.",
            param="seconds" if request.seconds is not None else "num_frames",
        )
