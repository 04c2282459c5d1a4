"""The HTTP API's bodies as pydantic models, shaped like the OpenAI videos API that sglang and vllm-omni serve
LTX-2 behind (`prompt`, `model`, `seconds`, `size` "WxH"; the job object with `status` and `progress`), plus
ltx-jax's own generation fields (`num_frames`, `fps`, `seed`, `num_inference_steps`, `guidance`,
`negative_prompt`, `flow`). Unknown fields are refused by name: a misspelt one would otherwise be ignored.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Status = Literal["queued", "in_progress", "completed", "failed", "cancelled"]
FINISHED: tuple[Status, ...] = ("completed", "failed", "cancelled")


class StreamGuidance(BaseModel):
    """One stream's guidance (`MultiModalGuiderParams`' fields); a field left out keeps the flow's default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cfg_scale: float | None = None
    stg_scale: float | None = None
    stg_blocks: list[int] | None = None
    rescale_scale: float | None = None
    modality_scale: float | None = None
    skip_step: int | None = None


class GuidanceFields(BaseModel):
    """`{"video": {...}, "audio": {...}}`: what the CLI's --video-* / --audio-* guidance flags set."""

    model_config = ConfigDict(extra="forbid")

    video: StreamGuidance | None = None
    audio: StreamGuidance | None = None


class VideoRequest(BaseModel):
    """`POST /v1/videos`: one generation; a field left out takes the served pipeline's default. In a multipart
    body, `guidance` is a JSON string and the image is the file part `input_reference`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    prompt: str = Field(min_length=1)
    model: str | None = None
    flow: str | None = None
    size: str | None = Field(default=None, description='"WIDTHxHEIGHT" in pixels, e.g. "768x512"')
    seconds: float | None = Field(default=None, description="instead of num_frames: the frames at fps, as 8k+1")
    num_frames: int | None = None
    fps: float | None = None
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**63, description="a 64-bit integer (JAX's key)")
    num_inference_steps: int | None = None
    negative_prompt: str | None = None
    guidance: GuidanceFields | None = None

    @field_validator("guidance", mode="before")
    @classmethod
    def _guidance_from_text(cls, value: object) -> object:
        """A form field carries text: the JSON object it holds (what is not JSON is left for the model to refuse)."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value


class VideoError(BaseModel):
    code: str
    message: str


class VideoJob(BaseModel):
    """A job, as `POST /v1/videos` and `GET /v1/videos/{id}` return it (OpenAI's video object)."""

    id: str
    object: Literal["video"] = "video"
    model: str
    status: Status
    progress: int = Field(ge=0, le=100, description="percent of the denoising steps done")
    created_at: int
    completed_at: int | None = None
    size: str
    seconds: str
    num_frames: int
    fps: float
    prompt: str
    error: VideoError | None = None


class VideoList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VideoJob]


class VideoDeleted(BaseModel):
    """`DELETE /v1/videos/{id}` on a finished job: the job and its files are gone."""

    id: str
    object: Literal["video.deleted"] = "video.deleted"
    deleted: bool = True


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ltx-jax"
    flow: str
    description: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """Every error response (OpenAI's shape): `{"error": {"message", "type", "param", "code"}}`."""

    error: ErrorDetail
