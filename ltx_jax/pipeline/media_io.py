"""Writing the result: H.264 video with an AAC audio track, through PyAV; or audio alone as a .wav.

Source: `ltx_pipelines/utils/media_io.py::encode_video` (`encode_audio` for the .wav: 16-bit PCM, stereo, at the
vocoder's rate). Video frames are `(F, H, W, 3)` uint8 RGB; audio is a float waveform in [-1, 1], `(channels,
samples)` or `(samples,)`, written as stereo (a mono track is duplicated, as the reference's vocoders emit stereo).
"""

from __future__ import annotations

import os
import wave
from collections.abc import Mapping, Sequence
from fractions import Fraction
from numbers import Integral

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


class Mp4Writer:
    """An mp4 written as its frames arrive: `with Mp4Writer(path, fps, height, width) as mp4:` then
    `mp4.write_frames(chunk)` for each `(n, H, W, 3)` uint8 chunk, and `mp4.write_audio(...)` last, as
    ltx-pipelines' `encode_video` interleaves decoding and encoding. The file appears at `path` only when
    the block ends without an error; until then it is `path + ".partial.mp4"`, removed on any error.

    `sample_rate` (Hz) declares the audio track up front: the mp4 header, written with the first frames,
    lists every stream.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fps: float,
        height: int,
        width: int,
        *,
        sample_rate: int | None = None,
        metadata: Mapping[str, str] | None = None,
        threads: int = 0,
    ) -> None:
        if height % 2 or width % 2:
            raise ValueError(f"H.264 (yuv420p) needs an even height and width, got {height}x{width}.")
        if sample_rate is not None and sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive when audio is given, got {sample_rate}.")
        self.path, self.fps, self.size, self.sample_rate = os.fspath(path), fps, (height, width), sample_rate
        self.metadata, self.threads = dict(metadata or {}), threads
        self._partial = f"{self.path}.partial.mp4"
        self._container = self._video = self._audio = None
        self._video_finished = False

    def __enter__(self) -> Mp4Writer:
        import av  # noqa: PLC0415 - PyAV is needed only to write files

        # use_metadata_tags: the mp4 muxer keeps only a few standard tags without it
        self._container = av.open(self._partial, mode="w", format="mp4", options={"movflags": "use_metadata_tags"})
        self._container.metadata.update(self.metadata)
        self._video = self._container.add_stream("libx264", rate=Fraction(self.fps).limit_denominator(1001))
        self._video.height, self._video.width = self.size
        self._video.pix_fmt = "yuv420p"
        # x264 on frame threads, not PyAV's default slice threads: the same encoder settings, and 1.4x
        # faster on 2 cores for a 1536x1024 video (the reference writes with slice threads). Its bytes can
        # then change with the timing when the CPU is contended (the same frames, encoded slightly otherwise)
        self._video.thread_type = "AUTO"
        self._video.thread_count = self.threads  # 0: x264's own choice (1.5 per core)
        if self.sample_rate is not None:
            self._audio = _audio_stream(self._container, self.sample_rate)
        return self

    def write_frames(self, frames: np.ndarray) -> None:
        """Encodes `(n, H, W, 3)` uint8 RGB frames, after those written before."""
        import av  # noqa: PLC0415

        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[1:] != (*self.size, 3) or frames.dtype != np.uint8:
            raise ValueError(
                f"frames must be (n, {self.size[0]}, {self.size[1]}, 3) uint8, got {frames.shape} {frames.dtype}."
            )
        for frame in frames:
            raise_if_signalled()
            self._container.mux(self._video.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))

    def write_audio(self, audio: np.ndarray) -> None:
        """Writes the whole waveform in [-1, 1], `(channels, samples)` or `(samples,)`, at `sample_rate`."""
        if self._audio is None:
            raise ValueError("This Mp4Writer has no audio track: give sample_rate= when creating it.")
        self._finish_video()  # the video's last packets before the audio's
        _write_audio(self._container, self._audio, audio, self.sample_rate)

    def _finish_video(self) -> None:
        if not self._video_finished:
            self._container.mux(self._video.encode())  # the encoder's delayed frames
            self._video_finished = True

    def __exit__(self, error_type: type | None, *_: object) -> None:
        try:
            if error_type is None:
                self._finish_video()
            self._container.close()
            if error_type is None:
                os.replace(self._partial, self.path)
        finally:
            if os.path.exists(self._partial):
                os.remove(self._partial)


def check_output_path(path: str | os.PathLike, name: str = "output_path") -> None:
    """Raises, before any work, where an mp4 cannot be written at `path` (the argument `name`)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{name} {os.fspath(path)!r} is a directory; give the mp4's file name.")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{name} {os.fspath(path)!r}: the folder {folder!r} does not exist; create it.")


AUDIO_SUFFIX = ".wav"  # what 1.2.0's t2a writes (`encode_audio`: pcm_s16le in a WAV container)


def check_audio_suffix(path: str | os.PathLike, name: str = "output_path") -> None:
    """An audio-only result is a .wav: raises naming `name` (the argument) for another suffix."""
    if os.path.splitext(os.fspath(path))[1].lower() != AUDIO_SUFFIX:
        raise ValueError(
            f"{name} {os.fspath(path)!r}: audio alone is written as a {AUDIO_SUFFIX} (16-bit PCM, as ltx-pipelines' "
            f"t2a writes it); give a path ending in {AUDIO_SUFFIX}."
        )


def check_audio_output_path(path: str | os.PathLike, name: str = "output_path") -> None:
    """`check_output_path` for an audio-only result, which is a .wav (`check_audio_suffix`)."""
    check_audio_suffix(path, name)
    check_output_path(path, name)


def write_wav(path: str | os.PathLike, audio: np.ndarray, sample_rate: int) -> None:
    """Writes the waveform in [-1, 1], `(channels<=2, samples)` or `(samples,)`, as a 16-bit PCM stereo .wav at
    `sample_rate` Hz, converted as 1.2.0's `write_audio` does (clipped, times 32767, truncated). The file appears
    at `path` only when complete; until then it is `path + ".partial.wav"`, removed on any error or signal."""
    check_audio_suffix(path, "path")
    samples = np.asarray(audio, np.float32)
    samples = samples[None] if samples.ndim == 1 else samples
    if samples.ndim != 2 or samples.shape[0] not in (1, 2) or not isinstance(sample_rate, Integral) or sample_rate <= 0:
        raise ValueError(
            f"audio must be (samples,) or (channels<=2, samples) at a positive integer rate, got {samples.shape} at "
            f"{sample_rate!r} Hz."
        )
    stereo = np.broadcast_to(samples, (2, samples.shape[1]))
    pcm = np.ascontiguousarray((np.clip(stereo, -1.0, 1.0) * 32767.0).astype("<i2").T)
    partial = f"{os.fspath(path)}.partial{AUDIO_SUFFIX}"
    try:
        with wave.open(partial, "wb") as out:
            out.setnchannels(2)
            out.setsampwidth(2)
            out.setframerate(int(sample_rate))
            for start in range(0, len(pcm), sample_rate):  # a second at a time: a signal stops it between them
                raise_if_signalled()
                out.writeframes(pcm[start : start + sample_rate].tobytes())
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


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
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (F, H, W, 3) uint8, got {frames.shape} {frames.dtype}.")
    rate = None if audio is None else sample_rate  # Mp4Writer checks it
    with Mp4Writer(path, fps, frames.shape[1], frames.shape[2], sample_rate=rate, metadata=metadata) as mp4:
        mp4.write_frames(frames)
        if audio is not None:
            mp4.write_audio(audio)


def write_mp4_chunks(
    path: str | os.PathLike,
    chunks: Sequence[np.ndarray],
    fps: float,
    audio: np.ndarray | None = None,
    sample_rate: int = 0,
    *,
    metadata: Mapping[str, str] | None = None,
    threads: int = 0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """`write_mp4` for frames in `(n, H, W, 3)` chunks that may still be computing (device arrays whose
    copies to the host are under way): each is encoded as soon as it is on the host, so encoding overlaps
    the computing of the next. Returns the frames joined and the `(channels, samples)` float32 audio."""
    shape = chunks[0].shape
    frames = np.empty((sum(chunk.shape[0] for chunk in chunks), *shape[1:]), np.uint8)
    rate = None if audio is None else sample_rate
    with Mp4Writer(path, fps, shape[1], shape[2], sample_rate=rate, metadata=metadata, threads=threads) as mp4:
        start = 0
        for chunk in chunks:
            host = np.asarray(chunk)
            frames[start : start + len(host)] = host
            start += len(host)
            mp4.write_frames(host)
        if audio is not None:
            audio = np.asarray(audio, np.float32)
            mp4.write_audio(audio)
    return frames, audio


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
