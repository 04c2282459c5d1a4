"""Conditioning audio: decoded with PyAV to float32 samples, as ltx-pipelines reads it.

Source: `ltx_pipelines/utils/media_io.py::decode_audio_from_file` and `_audio_frame_to_float`. Anything
PyAV decodes works (wav, mp3, flac, m4a/aac, the first audio track of a video). The samples match the
reference exactly: the same seek, the same selection of decoded frames by their pts, the same integer
scaling and the same `round`-ed trimming to [start_time, start_time + max_duration], except for 8-bit
unsigned PCM, which is centred here (see `_INT_FORMAT_OFFSET`). Where the reference returns None, these
raise, naming the command-line flag (`--audio-path`, `--audio-start-time`, `--audio-max-duration`).

Channels are returned as the file has them (mono (1, samples), stereo (2, samples), ...): mixing or
duplicating them to what the audio VAE expects is the caller's decision.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import av

# Full scale of PyAV's integer sample formats (`media_io._INT_FORMAT_MAX`); "p" = planar.
_INT_FORMAT_MAX = {
    "u8": 128.0,
    "u8p": 128.0,
    "s16": 32768.0,
    "s16p": 32768.0,
    "s32": 2147483648.0,
    "s32p": 2147483648.0,
}
# 8-bit PCM is unsigned with silence at 128. The reference only divides, mapping it to [0, 2) with a DC
# offset of 1; subtracting the offset first gives [-1, 1) like every other format.
_INT_FORMAT_OFFSET = {"u8": 128.0, "u8p": 128.0}
MAX_CHANNELS = 2  # what the audio VAE encodes (mono is duplicated)


def _validate_window(start_time: float, max_duration: float | None) -> None:
    if not (math.isfinite(start_time) and start_time >= 0):
        raise ValueError(f"--audio-start-time must be a finite number of seconds >= 0; got {start_time}.")
    if max_duration is not None and not (math.isfinite(max_duration) and max_duration > 0):
        raise ValueError(
            f"--audio-max-duration must be a finite number of seconds > 0; got {max_duration}: "
            "leave it out to read to the end of the audio."
        )


def _check_max_samples(max_duration: float | None, sample_rate: int) -> None:
    """The window keeps `round(max_duration * sample_rate)` samples: at least one."""
    if max_duration is not None and round(max_duration * sample_rate) < 1:
        raise ValueError(
            f"--audio-max-duration {max_duration} s is under one sample at the audio's {sample_rate} Hz: "
            f"pass at least {1 / sample_rate:.2g} s."
        )


def _open(path: str | os.PathLike) -> tuple[av.container.InputContainer, av.audio.stream.AudioStream]:
    """The opened container and its first audio stream, with the flag-naming errors."""
    import av  # noqa: PLC0415 - PyAV is needed only for conditioning audio

    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"--audio-path {os.fspath(path)!r} does not exist: pass an existing audio or video file."
        )
    try:
        container = av.open(os.fspath(path))
    except av.error.FFmpegError as error:
        raise ValueError(
            f"--audio-path {os.fspath(path)!r} cannot be decoded ({error}): pass a file FFmpeg reads "
            "(wav, mp3, flac, m4a/aac, or a video with an audio track)."
        ) from None
    if not container.streams.audio:
        kinds = sorted({stream.type for stream in container.streams}) or ["none"]
        container.close()
        raise ValueError(
            f"--audio-path {os.fspath(path)!r} has no audio stream (streams: {', '.join(kinds)}): "
            "pass a file with an audio track."
        )
    return container, container.streams.audio[0]


def _reported_duration(stream: av.audio.stream.AudioStream) -> float | None:
    """The stream's duration in seconds from the container's header, if it states one."""
    return float(stream.duration * stream.time_base) if stream.duration else None


def audio_channels(path: str | os.PathLike) -> int:
    """The channels of the media file `path`'s first audio stream; 0 without one (retake's source video may
    have none)."""
    import av  # noqa: PLC0415

    with av.open(os.fspath(path)) as container:
        return container.streams.audio[0].codec_context.channels if container.streams.audio else 0


def audio_duration(path: str | os.PathLike) -> float:
    """Seconds of audio in `path`'s first audio stream: the header's duration, else the decoded samples'."""
    container, stream = _open(path)
    with container:
        duration = _reported_duration(stream)
        if duration is None:
            duration = sum(frame.samples for frame in container.decode(stream)) / stream.rate
    return duration


def check_audio_file(path: str | os.PathLike, start_time: float = 0.0, max_duration: float | None = None) -> None:
    """Preflight of `read_audio`'s arguments without decoding the audio: the window is valid, the file exists,
    FFmpeg reads its header, it has an audio stream, and `start_time` lies before the stream's end where the
    header states a duration. Raises the errors `read_audio` would, and one for more than two channels
    (the audio VAE encodes mono or stereo)."""
    _validate_window(start_time, max_duration)
    container, stream = _open(path)
    with container:
        duration = _reported_duration(stream)
        _check_max_samples(max_duration, stream.rate)
        channels = stream.codec_context.channels
    if channels > MAX_CHANNELS:
        raise ValueError(
            f"--audio-path {os.fspath(path)!r} has {channels} audio channels; the audio VAE takes mono or stereo. "
            "Mix it down first (e.g. ffmpeg -i IN -ac 2 OUT.wav)."
        )
    if duration is not None and start_time >= duration:
        raise _start_past_end(path, start_time, duration)


def _start_past_end(path: str | os.PathLike, start_time: float, duration: float) -> ValueError:
    return ValueError(
        f"--audio-start-time {start_time} s is at or past the end of --audio-path {os.fspath(path)!r}, "
        f"whose audio lasts {duration:.3f} s: pass a start time below {duration:.3f}."
    )


def _frame_to_float(frame: av.AudioFrame) -> np.ndarray:
    """A decoded frame as `(channels, samples)` float32 (`media_io._audio_frame_to_float`, u8 centred)."""
    name = frame.format.name
    samples = frame.to_ndarray().astype(np.float32)
    if name in _INT_FORMAT_MAX:
        samples = (samples - _INT_FORMAT_OFFSET.get(name, 0.0)) / _INT_FORMAT_MAX[name]
    if not frame.format.is_planar:
        # Interleaved formats come as (1, samples * channels): de-interleave to (channels, samples).
        samples = samples.reshape(-1, len(frame.layout.channels)).T
    return samples


def _decode_window(
    container: av.container.InputContainer, stream: av.audio.stream.AudioStream, start_time: float, end_time: float
) -> tuple[list[np.ndarray], float | None]:
    """The decoded frames overlapping [start_time, end_time] and the first one's start time (the reference's
    loop: seek to the start's pts, skip frames ending before it, stop at the first starting after the end)."""
    time_base = stream.time_base
    container.seek(int(start_time / time_base), stream=stream)
    chunks, first_frame_time = [], None
    for frame in container.decode(audio=0):
        if frame.pts is None:
            continue
        frame_time = float(frame.pts * time_base)
        if frame_time + frame.samples / frame.sample_rate < start_time:
            continue
        if frame_time > end_time:
            break
        if first_frame_time is None:
            first_frame_time = frame_time
        chunks.append(_frame_to_float(frame))
    return chunks, first_frame_time


def read_audio(
    path: str | os.PathLike, start_time: float = 0.0, max_duration: float | None = None
) -> tuple[np.ndarray, int]:
    """`path`'s first audio stream from `start_time` for at most `max_duration` seconds (to the end if None).

    Returns `(waveform, sample_rate)`: waveform `(channels, samples)` float32 in [-1, 1] at the file's own
    rate and channel count (mono stays (1, samples); the caller mixes or duplicates channels), the samples
    of `decode_audio_from_file(path, ...).waveform[0]`. The clip is shorter than `max_duration` where the
    audio ends first. Raises FileNotFoundError for a missing file and ValueError for an undecodable one,
    one without audio, an invalid window, or a `start_time` at or past the end of the audio.
    """
    import av  # noqa: PLC0415 - PyAV is needed only for conditioning audio

    _validate_window(start_time, max_duration)
    container, stream = _open(path)
    with container:
        sample_rate = stream.rate
        _check_max_samples(max_duration, sample_rate)
        # The reference ends at the header's duration (an exact Fraction); a header without one leaves it open.
        end_time = start_time + max_duration if max_duration else math.inf
        if not max_duration and stream.duration:
            end_time = stream.duration * stream.time_base
        try:
            chunks, first_frame_time = _decode_window(container, stream, start_time, end_time)
        except av.error.FFmpegError as error:
            raise ValueError(f"--audio-path {os.fspath(path)!r} failed to decode ({error}): re-encode it.") from None
    if not chunks:
        duration = audio_duration(path)
        if start_time >= duration:
            raise _start_past_end(path, start_time, duration)
        raise ValueError(
            f"--audio-path {os.fspath(path)!r}: no audio decoded from {start_time} s on, though its stream reports "
            f"{duration:.3f} s: the file may be truncated; re-encode it."
        )
    audio = np.concatenate(chunks, axis=-1)
    # Codec frames need not align with the window: drop what precedes start_time in the first frame and
    # what follows start_time + max_duration in the last.
    skip = round((start_time - first_frame_time) * sample_rate)
    if skip > 0:
        audio = audio[..., skip:]
    if max_duration is not None:
        audio = audio[..., : round(max_duration * sample_rate)]
    if audio.shape[-1] == 0:
        raise _start_past_end(path, start_time, audio_duration(path))
    return audio, sample_rate
