"""Conditioning videos (IC-LoRA's reference video, retake's source): read with PyAV, each frame resized
and cropped.

Source: `ltx_pipelines/utils/media_io.py::load_video_conditioning`, `decode_video_from_file` and
`get_videostream_metadata`:
the first `frame_cap` frames as RGB, each resized to cover `height x width` and centre-cropped as
conditioning images are (`images.resize_and_center_crop`, without the CRF round trip), scaled to
[-1, 1].
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from ltx_jax.pipeline.images import resize_and_center_crop


def read_video_frames(path: str | os.PathLike, frame_cap: int) -> np.ndarray:
    """The first `frame_cap` frames of `path`'s first video stream, `(F, H, W, 3)` uint8 RGB."""
    import av  # noqa: PLC0415 - PyAV is needed only for conditioning videos

    if not os.path.isfile(path):
        raise FileNotFoundError(f"The conditioning video {os.fspath(path)!r} does not exist.")
    try:
        with av.open(os.fspath(path)) as container:
            if not container.streams.video:
                raise ValueError(f"The conditioning video {os.fspath(path)!r} has no video stream.")
            frames = []
            for frame in container.decode(container.streams.video[0]):
                frames.append(frame.to_rgb().to_ndarray())
                if len(frames) == frame_cap:
                    break
    except av.error.FFmpegError as error:
        raise ValueError(f"The conditioning video {os.fspath(path)!r} cannot be decoded ({error}).") from None
    return np.stack(frames)


def video_metadata(path: str | os.PathLike, frame_cap: int | None = None) -> tuple[float, int, int, int]:
    """`(fps, frames, width, height)` of `path`'s first video stream (`get_videostream_metadata`: the
    frames are counted by decoding where the container does not state them, up to `frame_cap`)."""
    import av  # noqa: PLC0415

    if not os.path.isfile(path):
        raise FileNotFoundError(f"The video {os.fspath(path)!r} does not exist.")
    try:
        with av.open(os.fspath(path)) as container:
            if not container.streams.video:
                raise ValueError(f"The video {os.fspath(path)!r} has no video stream.")
            stream = container.streams.video[0]
            frames = stream.frames or sum(1 for _ in itertools.islice(container.decode(stream), frame_cap))
            return float(stream.average_rate), frames, stream.codec_context.width, stream.codec_context.height
    except av.error.FFmpegError as error:
        raise ValueError(f"The video {os.fspath(path)!r} cannot be decoded ({error}).") from None


def load_video_conditioning(path: str | os.PathLike, height: int, width: int, frame_cap: int) -> np.ndarray:
    """The VAE encoder's input for a video: `(1, 3, F, height, width)` float32 in [-1, 1], F <= `frame_cap`
    (8k+1, as the encoder needs)."""
    frames = read_video_frames(path, frame_cap)
    if (len(frames) - 1) % 8:
        usable = (len(frames) - 1) // 8 * 8 + 1
        raise ValueError(
            f"The conditioning video {os.fspath(path)!r} gives {len(frames)} frames (of the {frame_cap} requested); "
            f"the VAE encodes 8k+1 frames: use a video of at least {frame_cap} frames, or generate {usable}."
        )
    resized = np.stack([resize_and_center_crop(frame, height, width) for frame in frames])
    return (np.moveaxis(resized, -1, 0) / np.float32(127.5) - np.float32(1.0))[None]


def load_mask_video(path: str | os.PathLike, height: int, width: int, frame_cap: int) -> np.ndarray:
    """ic-lora's attention mask: a grayscale video as `(1, 1, F, height, width)` weights in [0, 1]
    (`ic_lora._load_mask_video`: the frames' channel mean mapped from [-1, 1]; float32 here, bf16 there)."""
    frames = load_video_conditioning(path, height, width, frame_cap)
    return np.clip((frames.mean(axis=1, keepdims=True) + np.float32(1.0)) / np.float32(2.0), 0.0, 1.0)
