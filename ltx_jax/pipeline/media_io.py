"""Writing the result: H.264 video with an AAC audio track, through PyAV.

Source: `ltx_pipelines/utils/media_io.py::encode_video`. Video frames are `(F, H, W, 3)` uint8
RGB; audio is a float waveform in [-1, 1], `(channels, samples)` or `(samples,)`, written as stereo
(a mono track is duplicated, as the reference's vocoders emit stereo).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from ltx_jax.interrupts import raise_if_signalled


def video_to_uint8(video: np.ndarray) -> np.ndarray:
    """A decoded `(C=3, F, H, W)` video in [-1, 1] -> `(F, H, W, 3)` uint8, as the reference rounds it."""
    video = np.asarray(video, np.float32)
    if video.ndim != 4 or video.shape[0] != 3:
        raise ValueError(f"Expected a decoded video of shape (3, F, H, W), got {video.shape}.")
    scaled = np.clip((video + 1.0) / 2.0, 0.0, 1.0) * 255.0  # then truncated, as torch's .to(uint8)
    return np.moveaxis(scaled, 0, -1).astype(np.uint8)


def enhanced_prompt_metadata(prompt: str) -> dict[str, str]:
    """The mp4 tags an enhanced prompt is stored under (`ffprobe` shows both)."""
    return {"enhanced_prompt": prompt, "comment": prompt}


def write_mp4(
    path: str | os.PathLike,
    frames: np.ndarray,
    fps: float,
    audio: np.ndarray | None = None,
    sample_rate: int = 0,
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Encodes `frames` (and `audio` at `sample_rate` Hz) into `path`, with the container tags
    `metadata`; the file appears only when complete."""
    import av  # noqa: PLC0415 - PyAV is needed only to write files

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (F, H, W, 3) uint8, got {frames.shape} {frames.dtype}.")
    if frames.shape[1] % 2 or frames.shape[2] % 2:
        raise ValueError(f"H.264 (yuv420p) needs an even height and width, got {frames.shape[1]}x{frames.shape[2]}.")
    if audio is not None and sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive when audio is given, got {sample_rate}.")
    path = os.fspath(path)
    partial = f"{path}.partial.mp4"
    try:
        # use_metadata_tags: the mp4 muxer keeps only a few standard tags without it
        with av.open(partial, mode="w", format="mp4", options={"movflags": "use_metadata_tags"}) as container:
            container.metadata.update(metadata or {})
            stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
            stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
            # x264 on frame threads, not PyAV's default slice threads: the same encoder settings, and 1.4x
            # faster on 2 cores for a 1536x1024 video (the reference writes with slice threads)
            stream.thread_type = "AUTO"
            audio_stream = None if audio is None else _audio_stream(container, sample_rate)
            for frame in frames:
                raise_if_signalled()
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
            container.mux(stream.encode())
            if audio_stream is not None:
                _write_audio(container, audio_stream, audio, sample_rate)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


# The rates AAC can carry; other inputs (a2vid writes its input audio at its own rate) are resampled to 48 kHz.
AAC_SAMPLE_RATES = (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350)


def aac_rate(sample_rate: int) -> int:
    return sample_rate if sample_rate in AAC_SAMPLE_RATES else 48000


def _audio_stream(container: object, sample_rate: int) -> object:
    sample_rate = aac_rate(sample_rate)
    stream = container.add_stream("aac", rate=sample_rate)
    stream.codec_context.layout = "stereo"
    stream.codec_context.time_base = Fraction(1, sample_rate)
    return stream


def _write_audio(container: object, stream: object, audio: np.ndarray, sample_rate: int) -> None:
    import av  # noqa: PLC0415

    samples = np.asarray(audio, np.float32)
    if samples.ndim == 1:
        samples = samples[None]
    if samples.ndim != 2 or samples.shape[0] not in (1, 2):
        raise ValueError(f"audio must be (samples,) or (channels<=2, samples), got {samples.shape}.")
    stereo = np.broadcast_to(samples, (2, samples.shape[1]))
    pcm = (np.clip(stereo, -1.0, 1.0) * 32767.0).astype(np.int16)
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm.T).reshape(1, -1), format="s16", layout="stereo")
    frame.sample_rate = sample_rate
    codec = stream.codec_context
    resampler = av.audio.resampler.AudioResampler(
        format=codec.format or "fltp", layout="stereo", rate=aac_rate(sample_rate)
    )
    next_pts = 0
    for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
        resampled.pts = next_pts
        next_pts += resampled.samples
        container.mux(stream.encode(resampled))
    container.mux(stream.encode())
