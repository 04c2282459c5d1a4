"""Conditioning images: read, H.264-compress like a video frame, resize and crop, scale to [-1, 1].

Source: `ltx_pipelines/utils/media_io.py::load_image_conditioning`. The CRF round trip makes a still
image look like the compressed frames the model was trained on (CRF 33 for LTX-2.0/2.3).
"""

from __future__ import annotations

import io
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

DEFAULT_IMAGE_CRF = 33
LTX_2_4_IMAGE_CRF = 18  # 1.2.0's default from LTX-2.4 on (`constants.py::LTX_2_4_IMAGE_CRF`)


def read_image(path: str | os.PathLike) -> np.ndarray:
    """`(H, W, 3)` uint8 RGB (alpha dropped)."""
    from PIL import Image  # noqa: PLC0415 - pillow is needed only for conditioning images

    if not os.path.exists(path):
        raise FileNotFoundError(f"Conditioning image {os.fspath(path)!r} does not exist.")
    with Image.open(path) as image:
        return np.array(image.convert("RGB"))


def check_image_readable(path: str | os.PathLike) -> None:
    """Raises `ValueError` naming `path` unless an image decoder recognises it (reads its header and
    checks its structure, not its pixels): an unreadable file fails before any model is built."""
    from PIL import Image  # noqa: PLC0415

    try:
        with Image.open(path) as image:
            image.verify()
    except (OSError, SyntaxError, ValueError) as error:  # PIL's UnidentifiedImageError is an OSError
        raise ValueError(
            f"images: the conditioning image {os.fspath(path)!r} cannot be read as an image ({error}); "
            "give a PNG, JPEG or another format Pillow reads."
        ) from None


def crf_compress(image: np.ndarray, crf: int = DEFAULT_IMAGE_CRF) -> np.ndarray:
    """Encodes `image` as one H.264 frame at `crf` and decodes it (CRF 0: unchanged). Even size, as the codec needs."""
    import av  # noqa: PLC0415

    if crf == 0:
        return image
    height, width = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=1, options={"crf": str(crf), "preset": "veryfast"})
        stream.height, stream.width = height, width
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:height, :width]), format="rgb24")
        container.mux(stream.encode(frame.reformat(format="yuv420p")))
        container.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def resize_and_center_crop(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """`(H, W, 3)` -> `(height, width, 3)` float32: bilinear (half-pixel centres, no antialiasing, as
    torch's `interpolate(mode="bilinear", align_corners=False)`) to cover the target, then centre crop."""
    src_h, src_w = image.shape[:2]
    scale = max(height / src_h, width / src_w)
    new_h, new_w = math.ceil(src_h * scale), math.ceil(src_w * scale)
    resized = jax.image.resize(
        jnp.asarray(image, jnp.float32), (new_h, new_w, image.shape[2]), method="linear", antialias=False
    )
    top, left = (new_h - height) // 2, (new_w - width) // 2
    return np.asarray(resized[top : top + height, left : left + width])


def load_image_conditioning(
    path: str | os.PathLike, height: int, width: int, crf: int = DEFAULT_IMAGE_CRF
) -> np.ndarray:
    """The VAE encoder's input for an image: `(1, 3, 1, height, width)` float32 in [-1, 1]."""
    image = resize_and_center_crop(crf_compress(read_image(path), crf), height, width)
    return (np.moveaxis(image, -1, 0) / np.float32(127.5) - np.float32(1.0))[None, :, None]
