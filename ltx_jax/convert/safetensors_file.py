"""A safetensors reader that validates the whole header first and then reads one tensor at a time.

Format: an 8-byte little-endian header length, a JSON header (`__metadata__` plus, per tensor,
`dtype`, `shape` and `data_offsets` into the data section), then the data. Tensors are read with
`readinto` into a fresh buffer, not through a memory map, so a converted tensor's memory is freed
when it is dropped and a 40 GB file never becomes resident. bf16 and fp8 are reinterpreted bit for
bit (ml_dtypes), never widened on the way in.

`read(key, index)` reads only a box of a tensor: the box is a set of contiguous byte runs of the
row-major data (one run for a box along the leading axis), each read on its own; runs separated by
less than a page are read together, since the OS reads whole pages anyway.
"""

from __future__ import annotations

import dataclasses
import io
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
# Runs of a box no further apart than a page, or than the run itself, are read as one span: skipping
# less saves no I/O, and a column split (a run per row with an equal gap) becomes one read, not one per
# row. 0 reads every run on its own (exactly the box's bytes).
COALESCE_GAP_BYTES = 4096
MAX_SPAN_BYTES = 64 * 2**20  # the most read into a scratch buffer at once when runs are coalesced
Box = tuple[slice, ...]  # a step-1 slice per axis of a tensor


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

    def read(self, key: str, index: Box | None = None) -> np.ndarray:
        """The tensor `key` (or its box `index`, a step-1 slice per axis) as a numpy array in its stored
        dtype: a fresh buffer, not a view of the file. Only the box's bytes are read (plus gaps under
        `COALESCE_GAP_BYTES` or a run's length between its runs)."""
        info = self._tensors[key]
        box = normalize_box(info.shape, index)
        shape = tuple(s.stop - s.start for s in box)
        out = np.empty(math.prod(shape) * info.dtype.itemsize, np.uint8)
        if out.size:
            offsets, run = _runs(info.shape, info.dtype.itemsize, box)
            with open(self.path, "rb", buffering=0) as f:
                try:
                    _read_runs(f, info.offset, offsets, run, memoryview(out))
                except EOFError:
                    raise ValueError(f"{self.path}: tensor {key!r} is cut short: the file is truncated.") from None
        return out.view(info.dtype).reshape(shape)

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

    def __getitem__(self, index: Box) -> np.ndarray:
        """A box of the tensor, reading only its bytes (see `SafetensorsFile.read`)."""
        return self.file.read(self.key, index if isinstance(index, tuple) else (index,))


def lazy_tensors(file: SafetensorsFile) -> dict[str, LazyTensor]:
    """Key -> `LazyTensor` for every tensor of `file`."""
    return {key: LazyTensor(file, key) for key in file.keys()}


def normalize_box(shape: tuple[int, ...], index: Box | None) -> Box:
    """`index` with every slice's bounds made explicit (`slice(None)` -> `slice(0, n)`), one per axis."""
    if index is None:
        index = ()
    if len(index) > len(shape) or not all(isinstance(s, slice) and s.step in (None, 1) for s in index):
        raise ValueError(f"index must be up to {len(shape)} step-1 slices (one per axis of {shape}), got {index!r}.")
    index = (*index, *[slice(None)] * (len(shape) - len(index)))
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(index, shape, strict=True))


def _runs(shape: tuple[int, ...], itemsize: int, box: Box) -> tuple[np.ndarray, int]:
    """The contiguous byte runs of a non-empty `box` of a row-major tensor: their offsets (from the
    tensor's first byte, in the box's row-major order) and their common length.

    Axes after the last partial one are whole, so a run spans that axis's range times the rest;
    every index combination of the axes before it starts one run.
    """
    if not shape:
        return np.zeros(1, np.int64), itemsize
    strides = [math.prod(shape[i + 1 :]) * itemsize for i in range(len(shape))]
    last = max((i for i, (s, n) in enumerate(zip(box, shape, strict=True)) if (s.start, s.stop) != (0, n)), default=0)
    offsets = np.array([box[last].start * strides[last]], np.int64)
    for axis in reversed(range(last)):
        starts = np.arange(box[axis].start, box[axis].stop, dtype=np.int64) * strides[axis]
        offsets = np.add.outer(starts, offsets).ravel()
    return offsets, (box[last].stop - box[last].start) * strides[last]


def _read_runs(f: io.RawIOBase, base: int, offsets: np.ndarray, run: int, out: memoryview) -> None:
    """Reads the runs at `base + offsets` one after another into `out`; runs closer than
    COALESCE_GAP_BYTES (or the run's length) are read as one span (at most MAX_SPAN_BYTES) into a
    scratch buffer and cut out."""
    position, i = 0, 0
    while i < len(offsets):
        j = i + 1
        while (
            j < len(offsets)
            and COALESCE_GAP_BYTES > 0
            and offsets[j] - offsets[j - 1] - run <= max(COALESCE_GAP_BYTES, run)
            and offsets[j] + run - offsets[i] <= MAX_SPAN_BYTES
        ):
            j += 1
        if j == i + 1:
            _read_range(f, base + int(offsets[i]), out[position : position + run])
            position += run
        else:
            span = np.empty(int(offsets[j - 1] - offsets[i]) + run, np.uint8)
            _read_range(f, base + int(offsets[i]), memoryview(span))
            for start in offsets[i:j] - offsets[i]:
                out[position : position + run] = span[start : start + run]
                position += run
        i = j


def _read_range(f: io.RawIOBase, offset: int, out: memoryview) -> None:
    """Fills `out` from byte `offset` of `f`: every byte a `SafetensorsFile` reads passes through here.
    Raises `EOFError` if the file ends first."""
    f.seek(offset)
    done = 0
    while done < len(out):
        count = f.readinto(out[done:])
        if not count:
            raise EOFError(offset + done)
        done += count


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
