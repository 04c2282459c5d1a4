"""`GeneratedVideo`: what one generation returns, and writing it to an mp4."""

from __future__ import annotations

import dataclasses
import os

import jax
import numpy as np

from ltx_jax.pipeline.media_io import (
    check_audio_output_path,
    check_output_path,
    enhanced_prompt_metadata,
    write_mp4,
    write_wav,
)
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.timing import ForwardStats

PathLike = str | os.PathLike


@dataclasses.dataclass(frozen=True)
class GeneratedVideo:
    """One generation's result.

    Attributes:
        video: `(F, H, W, 3)` uint8 frames; None on processes other than 0 (only process 0 decodes), and for
            an audio-only flow (t2a).
        audio: `(samples, channels)` float32 waveform in [-1, 1]; None without audio or off process 0.
        frame_rate: frames per second.
        sample_rate: audio samples per second (0 without audio).
        video_latent, audio_latent: the final latents `(1, C, F, H, W)` and `(1, C, T, M)`.
        settings: every argument the generation used, defaults filled in.
        timings: wall seconds per phase ("prompt_encoding", "denoising", "video_decoding", "audio_decoding";
            two-stage flows also "stage_1_denoising", "upsampling" and "stage_2_denoising", within "denoising";
            a2vid "audio_encoding" there too, and no "audio_decoding": its audio is the input's; with
            `generate(..., output_path=)`, "decoding_and_mp4_writing" instead of the decoding phases).
        peak_memory: per phase, the largest device-memory peak (bytes, over this process's devices,
            since the process started) when the phase ended; the phase where it grows holds the peak.
            Empty where the backend does not report memory (CPU).
        forwards: per video token count (None: audio only), the DiT forwards and their median time.
        enhanced_prompt: the prompt Gemma 3 wrote and the video was generated from (`enhance_prompt`);
            None without enhancement. `save` stores it in the mp4's metadata.
    """

    video: np.ndarray | None
    audio: np.ndarray | None
    frame_rate: float
    sample_rate: int
    video_latent: jax.Array | None
    audio_latent: jax.Array | None
    settings: GenerationSettings
    timings: dict[str, float]
    forwards: dict[int | None, ForwardStats]
    peak_memory: dict[str, int] = dataclasses.field(default_factory=dict)
    enhanced_prompt: str | None = None

    def save(self, path: PathLike) -> None:
        """Writes an mp4 (H.264 + AAC) to `path`; the file appears only when complete. An enhanced
        prompt is stored in its metadata ("enhanced_prompt", and "comment" for players). An audio-only
        result (the t2a flow's: audio and no frames) is written as a 16-bit PCM .wav instead."""
        if self.video is None and self.audio is not None:
            check_audio_output_path(path, name="save: path")
            write_wav(path, self.audio.T, self.sample_rate)
            return
        if self.video is None:
            raise ValueError(
                f"This process ({jax.process_index()}) holds no frames: only process 0 decodes; save from it."
            )
        check_output_path(path, name="save: path")
        audio = None if self.audio is None else self.audio.T
        metadata = {} if self.enhanced_prompt is None else enhanced_prompt_metadata(self.enhanced_prompt)
        write_mp4(path, self.video, self.frame_rate, audio, self.sample_rate, metadata=metadata)
