"""Gemma 3's image preprocessing: an RGB image -> the vision tower's pixel values.

Source: transformers' slow, PIL-based image processor (`Gemma3ImageProcessor` in
`models/gemma3/image_processing_gemma3.py` of transformers 4.x, `Gemma3ImageProcessorPil` in
`image_processing_pil_gemma3.py` of 5.x) with Gemma 3's `preprocessor_config.json`: a PIL resize
of the uint8 image to `image_size x image_size` (bilinear), `x * rescale_factor` in float64 cast to
float32, then `(x - mean) / std` in float32, channels first. Pan-and-scan crops are not implemented.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

PIL_BILINEAR = int(Image.Resampling.BILINEAR)


@dataclasses.dataclass(frozen=True)
class Gemma3ImageConfig:
    """The keyword arguments of `gemma3_pixel_values`; the defaults are Gemma 3's released preprocessor."""

    image_size: int = 896
    image_mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: tuple[float, ...] = (0.5, 0.5, 0.5)
    rescale_factor: float = 1 / 255
    resample: int = PIL_BILINEAR


def gemma3_pixel_values(
    image: np.ndarray,
    image_size: int = 896,
    *,
    image_mean: Sequence[float] = (0.5, 0.5, 0.5),
    image_std: Sequence[float] = (0.5, 0.5, 0.5),
    rescale_factor: float = 1 / 255,
    resample: int = PIL_BILINEAR,
) -> np.ndarray:
    """An RGB image (H, W, 3) uint8 -> pixel values (1, 3, image_size, image_size) float32.

    `gemma3_pixel_values(image, **dataclasses.asdict(read_preprocessor_config(gemma_root)))` applies a
    checkpoint's own settings.
    """
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(
            f"image has shape {image.shape} and dtype {image.dtype}; gemma3_pixel_values takes an RGB (H, W, 3) "
            "uint8 array: convert others with np.asarray(PIL.Image.open(path).convert('RGB'))."
        )
    resized = np.asarray(Image.fromarray(image).resize((image_size, image_size), resample=resample))
    scaled = (resized.astype(np.float64) * rescale_factor).astype(np.float32)
    normed = (scaled - np.asarray(image_mean, np.float32)) / np.asarray(image_std, np.float32)
    return normed.transpose(2, 0, 1)[None]


def read_preprocessor_config(gemma_root: str | Path) -> Gemma3ImageConfig:
    """The first `preprocessor_config.json` below `gemma_root` as a `Gemma3ImageConfig` (its defaults
    without one). Raises `ValueError` for steps this port does not implement (pan and scan, a
    non-square size, a skipped resize, rescale or normalization)."""
    path = next(iter(sorted(Path(gemma_root).rglob("preprocessor_config.json"))), None)
    if path is None:
        return Gemma3ImageConfig()
    config = {key: value for key, value in json.loads(path.read_text()).items() if value is not None}
    implemented = {"do_pan_and_scan": False, "do_resize": True, "do_rescale": True, "do_normalize": True}
    unsupported = {k: config[k] for k, v in implemented.items() if k in config and bool(config[k]) != v}
    default = Gemma3ImageConfig()
    size = config.get("size", {"height": default.image_size, "width": default.image_size})
    if size.get("height") is None or size.get("height") != size.get("width"):
        unsupported["size"] = size
    if unsupported:
        raise ValueError(
            f"{path} sets {unsupported}; this port implements a square resize, rescale and normalization "
            "without pan and scan (Gemma 3's released preprocessor_config.json); set those values."
        )
    return Gemma3ImageConfig(
        image_size=int(size["height"]),
        image_mean=_per_channel(config.get("image_mean", default.image_mean)),
        image_std=_per_channel(config.get("image_std", default.image_std)),
        rescale_factor=float(config.get("rescale_factor", default.rescale_factor)),
        resample=int(config.get("resample", default.resample)),
    )


def _per_channel(value: float | Sequence[float]) -> tuple[float, ...]:
    """A mean or std as transformers takes it (one number, or one per channel) -> one per RGB channel."""
    return tuple(float(v) for v in value) if isinstance(value, Sequence) else (float(value),) * 3
