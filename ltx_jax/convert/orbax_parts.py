"""A converted checkpoint's parameters as several independent Orbax checkpoints ("parts") of about
`PART_BYTES` each: written one after another with bounded host memory, restored concurrently.

Parts replace Orbax's partial saves (`ocp.partial.save`, format 1): each of those merged its keys into
the metadata of every earlier save and compared every pair of keys (orbax-checkpoint 0.12.8), so the
work grew with the square of the keys saved so far: 94 s of a 118 s conversion at 8 blocks, 20% of the
48-block DiT in 240 s on the H200's host (docs/benchmarks.md). A part is written once and never read
back while converting.
"""

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import numpy as np
from orbax.checkpoint import v1 as ocp

PART_BYTES = 256 * 2**20  # converted bytes held in memory before they are written as a part
RESTORE_THREADS = 8  # parts restored at once


def nest(flat: Mapping[tuple[Any, ...], Any]) -> dict[str, Any]:
    """`{("a", 0, "b"): x}` -> `{"a": {"0": {"b": x}}}`, the layout stored in Orbax."""
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(str(part), {})
        node[str(path[-1])] = value
    return tree


def lookup(tree: Mapping[str, Any], path: tuple[Any, ...]) -> Any:  # noqa: ANN401 - a stored leaf
    for part in path:
        tree = tree[str(part)]
    return tree


def key(path: tuple[Any, ...]) -> str:
    """A parameter path as a part's manifest lists it: `transformer_blocks/3/attn1/to_q/kernel`."""
    return "/".join(map(str, path))


def part_dir(directory: str, index: int) -> str:
    return os.path.join(directory, f"{index:05d}")


class PartWriter:
    """Writes `(path, array)` pairs into parts under `directory`, one part per `PART_BYTES` (or one
    larger array); `close` writes the last and returns each part's keys, in order, for the manifest."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.parts: list[list[str]] = []
        self._pending: dict[tuple[Any, ...], np.ndarray] = {}
        self._pending_bytes = 0

    def add(self, path: tuple[Any, ...], array: np.ndarray) -> None:
        if self._pending and self._pending_bytes + array.nbytes > PART_BYTES:
            self._flush()
        self._pending[path] = array
        self._pending_bytes += array.nbytes

    def close(self) -> list[list[str]]:
        if self._pending:
            self._flush()
        return self.parts

    def _flush(self) -> None:
        ocp.save(part_dir(self.directory, len(self.parts)), nest(self._pending))
        self.parts.append([key(path) for path in self._pending])
        self._pending, self._pending_bytes = {}, 0


def restore_parts(
    directory: str, parts: Iterable[Iterable[str]], abstract: Mapping[tuple[Any, ...], jax.ShapeDtypeStruct]
) -> dict[tuple[Any, ...], jax.Array]:
    """Every parameter of `abstract` (path -> shape, dtype and sharding) restored from the parts under
    `directory` that the manifest lists (`parts`: each part's keys), `RESTORE_THREADS` parts at a time.
    Raises `ValueError` naming the parameters no part holds."""
    paths = {key(path): path for path in abstract}
    parts = [list(keys) for keys in parts]
    missing = set(paths) - {k for keys in parts for k in keys}
    if missing:
        raise ValueError(f"{directory}: no part holds {len(missing)} parameters, e.g. {sorted(missing)[0]!r}.")

    def restore(index: int, keys: list[str]) -> dict[tuple[Any, ...], jax.Array]:
        wanted = {paths[k]: abstract[paths[k]] for k in keys if k in paths}
        restored = ocp.load(part_dir(directory, index), nest(wanted))
        return {path: lookup(restored, path) for path in wanted}

    values: dict[tuple[Any, ...], jax.Array] = {}
    with ThreadPoolExecutor(RESTORE_THREADS) as pool:
        for restored in pool.map(restore, range(len(parts)), parts):
            values.update(restored)
    return values
