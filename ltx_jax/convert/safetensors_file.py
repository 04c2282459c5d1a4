"""A safetensors reader that validates the whole header first and then reads one tensor at a time.

Format: an 8-byte little-endian header length, a JSON header (`__metadata__` plus, per tensor,
`dtype`, `shape` and `data_offsets` into the data section), then the data. Tensors are read with
`readinto` into a fresh buffer, not through a memory map, so a converted tensor's memory is freed
when it is dropped and a 40 GB file never becomes resident. bf16 and fp8 are reinterpreted bit for
bit (ml_dtypes), never widened on the way in.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from collections.abc import Iterator

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
MAX_HEADER_BYTES = 100 * 2**20  # the format's own limit


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int  # absolute position in the file
    nbytes: int


class SafetensorsFile:
    """`SafetensorsFile(path)`: `metadata`, `keys()`, `info(key)`, `read(key)`.

    Raises `ValueError` naming the file and the problem for a truncated file, a corrupt header,
    or a tensor whose dtype is not a safetensors dtype.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise ValueError(
                    f"{self.path}: not a safetensors file ({size} bytes, shorter than its 8-byte header length)."
                )
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
                raise ValueError(
                    f"{self.path}: header length {header_len} does not fit the file ({size} bytes): truncated or "
                    "not a safetensors file."
                )
            try:
                header = json.loads(f.read(header_len))
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"{self.path}: the safetensors header is not valid JSON ({error}).") from None
        self.metadata: dict[str, str] = header.pop("__metadata__", None) or {}
        data_start, data_size = 8 + header_len, size - 8 - header_len
        self._tensors = {
            key: _tensor_info(self.path, key, entry, data_start, data_size) for key, entry in header.items()
        }

    def keys(self) -> list[str]:
        return list(self._tensors)

    def __contains__(self, key: str) -> bool:
        return key in self._tensors

    def info(self, key: str) -> TensorInfo:
        return self._tensors[key]

    def read(self, key: str) -> np.ndarray:
        """The tensor `key` as a numpy array in its stored dtype (a fresh buffer, not a view of the file)."""
        info = self._tensors[key]
        buffer = np.empty(info.nbytes, np.uint8)
        with open(self.path, "rb") as f:
            f.seek(info.offset)
            if f.readinto(memoryview(buffer)) != info.nbytes:
                raise ValueError(f"{self.path}: tensor {key!r} is cut short: the file is truncated.")
        return buffer.view(info.dtype).reshape(info.shape)

    def iter_tensors(self) -> Iterator[tuple[str, np.ndarray]]:
        for key in self._tensors:
            yield key, self.read(key)


class LazyTensor:
    """A tensor of a `SafetensorsFile` with its shape known and its bytes read only when it is
    converted to an array, so key filters and shape checks touch nothing else of the file."""

    def __init__(self, file: SafetensorsFile, key: str) -> None:
        self.file, self.key, self.shape = file, key, file.info(key).shape

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:  # noqa: ARG002
        array = self.file.read(self.key)
        return array if dtype is None else array.astype(dtype)


def lazy_tensors(file: SafetensorsFile) -> dict[str, LazyTensor]:
    """Key -> `LazyTensor` for every tensor of `file`."""
    return {key: LazyTensor(file, key) for key in file.keys()}


def _tensor_info(path: str, key: str, entry: dict, data_start: int, data_size: int) -> TensorInfo:
    dtype_name = entry.get("dtype")
    if dtype_name not in DTYPES:
        raise ValueError(
            f"{path}: tensor {key!r} has dtype {dtype_name!r}, which ltx-jax cannot read; supported: {sorted(DTYPES)}."
        )
    dtype, shape = DTYPES[dtype_name], tuple(entry["shape"])
    begin, end = entry["data_offsets"]
    nbytes = math.prod(shape) * dtype.itemsize
    if end - begin != nbytes or begin < 0:
        raise ValueError(
            f"{path}: tensor {key!r} spans {end - begin} bytes but {dtype_name}{list(shape)} needs {nbytes}."
        )
    if end > data_size:
        raise ValueError(
            f"{path}: tensor {key!r} ends at byte {data_start + end} but the file has {data_start + data_size}: "
            "the file is truncated (an interrupted download?)."
        )
    return TensorInfo(dtype, shape, data_start + begin, nbytes)


def parse_metadata_json(metadata: dict[str, str], key: str) -> object:
    """A metadata value that ltx-core stores as a JSON string (e.g. `config`), parsed."""
    value = metadata[key]
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
