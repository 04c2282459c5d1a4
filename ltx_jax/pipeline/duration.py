"""`--auto-duration`: the frame count LTX-2.5's duration head predicts for a prompt, on the VAE's frame grid.

Source: ltx-pipelines 1.2.0 `utils/blocks.py` (`DurationPredictor`) and `utils/helpers.py` (`snap_frames_to_grid`,
`seconds_to_clamped_num_frames`): the predicted seconds times the frame rate, rounded (Python's `round`, half to
even) and clamped to `[min, max]` seconds' frames, then floored to `8k + 1`; a result below the minimum is raised
to the next grid point instead, so the bounds always hold. Batch 1.
"""

from __future__ import annotations

import json
import logging
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.convert.safetensors_file import SafetensorsFile, lazy_tensors
from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model.abstract import abstract_module
from ltx_jax.model.duration_head import DurationHead, duration_head_from_config, duration_head_state_dict

TIME_SCALE = 8  # the video VAE's temporal compression: frame counts are 8k + 1
DEFAULT_AUTO_DURATION = (1.0, 20.0)  # seconds: ltx-pipelines' `DEFAULT_AUTO_DURATION`, where num_frames is left out
logger = logging.getLogger(__name__)


def snap_frames_to_grid(frames: int, time_scale: int = TIME_SCALE) -> int:
    """`frames` rounded down to the nearest `k * time_scale + 1`."""
    if frames < 1:
        raise ValueError(f"frames must be at least 1, got {frames}.")
    return (frames - 1) // time_scale * time_scale + 1


def seconds_to_clamped_num_frames(
    seconds: float, *, frame_rate: float, min_frames: int = 1, max_frames: int = 1024, time_scale: int = TIME_SCALE
) -> int:
    """`seconds` as a frame count on the grid, within `[min_frames, max_frames]`."""
    frames = snap_frames_to_grid(max(min_frames, min(round(seconds * frame_rate), max_frames)), time_scale)
    if frames < min_frames:
        frames = min(-(-(min_frames - 1) // time_scale) * time_scale + 1, max_frames)
    return frames


class DurationPredictor:
    """`predictor(video_encoding, audio_encoding, frame_rate=...)` -> frames, from one prompt's contexts."""

    def __init__(self, head: DurationHead) -> None:
        self.head = head

    def seconds(self, video_encoding: jax.Array | None, audio_encoding: jax.Array | None) -> float:
        """The head's prediction for one prompt (contexts of batch 1), in seconds."""
        predicted = np.asarray(self.head(video_encoding, audio_encoding))
        if predicted.shape != (1,):
            raise ValueError(
                f"the duration head predicts one prompt at a time; got contexts of batch {predicted.shape}."
            )
        return float(predicted[0])

    def __call__(
        self,
        video_encoding: jax.Array | None,
        audio_encoding: jax.Array | None,
        *,
        frame_rate: float,
        min_seconds: float = 1.0,
        max_seconds: float = 20.0,
    ) -> int:
        if not all(math.isfinite(v) and v > 0 for v in (frame_rate, min_seconds, max_seconds)):
            raise ValueError(
                f"frame_rate, min_seconds and max_seconds must be positive finite numbers, got {frame_rate}, "
                f"{min_seconds}, {max_seconds}."
            )
        if min_seconds > max_seconds:
            raise ValueError(f"the duration's minimum {min_seconds} s is above its maximum {max_seconds} s.")
        seconds = self.seconds(video_encoding, audio_encoding)
        frames = bounded_frames(seconds, (min_seconds, max_seconds), frame_rate)
        clamped = "" if min_seconds <= seconds <= max_seconds else f", outside [{min_seconds}, {max_seconds}] s"
        logger.info("duration head: %.2f s%s -> %d frames at %g fps", seconds, clamped, frames, frame_rate)
        return frames


def load_duration_predictor(path: str | os.PathLike, dtype: jnp.dtype = jnp.bfloat16) -> DurationPredictor:
    """The duration head of an LTX-2.5 file (`duration_head.*` tensors; its `config` metadata gives the
    connectors' widths and the head's sizes), in `dtype` as the pipeline runs it (1.2.0: the pipeline's bf16)."""
    file = SafetensorsFile(path)
    tensors = duration_head_state_dict(lazy_tensors(file))
    if not tensors:
        raise ValueError(
            f"duration_head_path (--duration-head-path) {os.fspath(path)!r} holds no duration_head.* tensors: give "
            "LTX-2.5's duration head file."
        )
    config = json.loads(file.metadata.get("config", "{}"))
    head = abstract_module(lambda rngs: duration_head_from_config(config, rngs=rngs, param_dtype=dtype))
    load_state_dict(head, tensors, prefix="")
    return DurationPredictor(head)


def bounded_frames(seconds: float, bounds: tuple[float, float], frame_rate: float) -> int:
    """`seconds` as frames on the grid at `frame_rate`, within `bounds` (seconds), as 1.2.0's `DurationPredictor`."""
    low, high = (round(bound * frame_rate) for bound in bounds)
    return seconds_to_clamped_num_frames(seconds, frame_rate=frame_rate, min_frames=low, max_frames=high)


def most_frames(bounds: tuple[float, float], frame_rate: float) -> int:
    """The largest frame count a prediction within `bounds` (seconds) can give at `frame_rate`."""
    return bounded_frames(bounds[1], bounds, frame_rate)
