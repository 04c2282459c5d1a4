"""The tensors of a synthetic file, and writing them: the safetensors format written tensor by tensor.

`Planned` says what one tensor holds; `write_safetensors` writes a file of them (8-byte little-endian
header length, the JSON header, then the raw bytes) from a thread pool, never holding more than a few
32 MiB chunks, as NAME.partial renamed when complete. Used by make_synthetic_checkpoint.py.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import statistics
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import torch
from tqdm import tqdm

NORMAL_STD, CHUNK_VALUES = 0.02, 1 << 24  # 32 MiB of bf16 per generated chunk
_ITEMSIZE = {"BF16": 2, "U8": 1}  # bytes per value of the safetensors dtypes written here


@dataclasses.dataclass(frozen=True)
class Planned:
    """One tensor to write: bf16 of `shape`, filled "normal", "ones", "zeros" or with `values` (bf16 bits), or
    (`dtype` "U8", `of_bytes`) a uint8 tensor of given bytes."""

    shape: tuple[int, ...]
    fill: str = "normal"
    values: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    dtype: str = "BF16"

    @classmethod
    def of_bytes(cls, data: bytes) -> Planned:
        """`data` as a 1-D uint8 tensor: how packed files carry a tokenizer or a JSON file."""
        return cls((len(data),), "values", np.frombuffer(data, np.uint8), "U8")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _ITEMSIZE[self.dtype]


_STATISTICS_FILL = {"std-of-means": "ones", "mean-of-means": "zeros"}


def model_tensors(model: torch.nn.Module) -> dict[str, Planned]:
    """A model's state dict as `Planned` tensors: norms 1 / 0, statistics, other buffers' own values (a
    meta-device buffer, which its model computes, is an error), everything else normal."""
    norms = {name for name, module in model.named_modules() if "Norm" in type(module).__name__}
    params = dict(model.named_parameters(remove_duplicate=False))
    out = {}
    for key, value in model.state_dict().items():
        owner, _, leaf = key.rpartition(".")
        shape = tuple(value.shape)
        if key in params:
            out[key] = Planned(shape, ("ones" if leaf == "weight" else "zeros") if owner in norms else "normal")
        elif leaf in _STATISTICS_FILL:
            out[key] = Planned(shape, _STATISTICS_FILL[leaf])
        elif value.is_meta:
            raise RuntimeError(f"{type(model).__name__}.{key} is computed at construction: build it on the CPU.")
        else:
            bits = value.detach().float().numpy().astype(ml_dtypes.bfloat16).view(np.uint16).reshape(-1)
            out[key] = Planned(shape, "values", bits)
    return out


def _normal_table(std: float) -> np.ndarray:
    """bf16 bit patterns of the 65,536 quantiles (i + 0.5) / 65536 of normal(0, std)."""
    dist = statistics.NormalDist(0.0, std)
    quantiles = np.array([dist.inv_cdf((i + 0.5) / 65536) for i in range(65536)], np.float32)
    return quantiles.astype(ml_dtypes.bfloat16).view(np.uint16)


_CONSTANTS = {"ones": 0x3F80, "zeros": 0}  # bf16 bit patterns


_TABLE = _normal_table(NORMAL_STD)


def _chunk(tensor: Planned, start: int, count: int, seed: tuple[int, ...]) -> np.ndarray:
    """Values `start:start + count` of a tensor (flattened) as bf16 bits; normal values depend only on `seed`."""
    if tensor.values is not None:
        return tensor.values[start : start + count]
    if tensor.fill in _CONSTANTS:
        return np.full(count, _CONSTANTS[tensor.fill], np.uint16)
    bits = np.random.default_rng(seed).bit_generator.random_raw((count + 3) // 4).view(np.uint16)
    return _TABLE[bits[:count]]


def _in_order(pool: ThreadPoolExecutor, fn: Callable[..., Any], jobs: Iterator[tuple], ahead: int) -> Iterator[Any]:
    """`fn(*job)` for each job, computed up to `ahead` jobs ahead on `pool`, yielded in order (bounded memory)."""
    pending: collections.deque[Future] = collections.deque()
    for job in jobs:
        pending.append(pool.submit(fn, *job))
        if len(pending) > ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def write_safetensors(
    path: Path, tensors: Mapping[str, Planned], metadata: Mapping[str, str] | None, seed: int, workers: int
) -> None:
    """Writes `tensors` (sorted by key, as safetensors does) to `path`, never holding more than a few chunks."""
    keys = sorted(tensors)
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for key in keys:
        t = tensors[key]
        header[key] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes with spaces
    salt = zlib.crc32(path.name.encode())
    jobs = (
        (tensors[key], start, min(CHUNK_VALUES, n - start), (seed, salt, index, start))
        for index, key in enumerate(keys)
        for n in [math.prod(tensors[key].shape)]
        for start in range(0, n, CHUNK_VALUES)
    )
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as f, ThreadPoolExecutor(workers) as pool:
            f.write(struct.pack("<Q", len(blob)) + blob)
            with tqdm(total=offset, unit="B", unit_scale=True, desc=path.name) as bar:
                for chunk in _in_order(pool, _chunk, jobs, ahead=2 * workers):
                    f.write(memoryview(chunk))
                    bar.update(chunk.nbytes)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:  # noqa: ANN401
    path.write_text(json.dumps(value, indent=2) + "\n")
