"""A converted checkpoint's parameters as several independent Orbax checkpoints ("parts") of about
`PART_BYTES` each: written one after another with bounded host memory, restored concurrently.

Parts replace Orbax's partial saves (`ocp.partial.save`, format 1): each of those merged its keys into
the metadata of every earlier save and compared every pair of keys (orbax-checkpoint 0.12.8), so the
work grew with the square of the keys saved so far: in a profile of an 8-block conversion, the 64 MB
saves took 0.16 s each in the first quarter and 1.43 s in the last; 20% of the 48-block DiT took 240 s
on the H200's host (benchmarks/results/2026-12-04/README.md, "Eighth round"). A part is written once
and never read back while converting.
"""

import contextvars
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import numpy as np
from orbax.checkpoint import v1 as ocp

from ltx_jax.convert.state_dict import named_keys
from ltx_jax.interrupts import signals_deferred

PART_BYTES = 256 * 2**20  # converted bytes held in memory before they are written as a part
# Parts restored at once by a single process. 16 rather than 8: 3.74 against 3.43 GB/s for 8 GB of 256 MB
# parts from the RAM disk to an H100 on one host (32: 3.62), 6.1-6.35 for both on another. Neither the storage
# nor the transfers is the bound; Orbax's read most likely is (benchmarks/bench_restore_parts.py,
# benchmarks/results/2026-12-05/README.md, "Tenth round").
RESTORE_THREADS = 16


def nest(flat: Mapping[tuple[Any, ...], Any]) -> dict[str, Any]:
    """`{("a", 0, "b"): x}` -> `{"a": {"0": {"b": x}}}`, the layout stored in Orbax."""
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(str(part), {})
        node[str(path[-1])] = value
    return tree


def lookup(tree: Mapping[str, Any], path: tuple[Any, ...]) -> Any:
    for part in path:
        tree = tree[str(part)]
    return tree


def manifest_key(path: tuple[Any, ...]) -> str:
    """A parameter path as the manifest lists it: `transformer_blocks/3/attn1/to_q/kernel`."""
    return "/".join(map(str, path))


def part_dir(directory: str, index: int) -> str:
    return os.path.join(directory, f"{index:05d}")


class PartWriter:
    """Writes `(path, array)` pairs into uncompressed parts under `directory`, one part per `PART_BYTES`
    (or one larger array); `close` writes the last and returns each part's keys, in order, for the
    manifest. Uncompressed: zstd saves about a fifth of the disk on bf16 weights but cut the write rate
    about threefold."""

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
        context = ocp.Context()
        context.array.saving.use_compression = False
        with context, signals_deferred():  # a signal stops the conversion between parts, not inside one
            ocp.save(part_dir(self.directory, len(self.parts)), nest(self._pending))
        self.parts.append([manifest_key(path) for path in self._pending])
        self._pending, self._pending_bytes = {}, 0


def restore_parts(
    directory: str,
    parts: Sequence[Sequence[str]],
    abstract: Mapping[tuple[Any, ...], jax.ShapeDtypeStruct],
    finish: Callable[[tuple[Any, ...], jax.Array], jax.Array] = lambda _, value: value,
) -> dict[tuple[Any, ...], jax.Array]:
    """Every parameter of `abstract` (path -> shape, dtype and sharding) restored from the parts under
    `directory` that the manifest lists (`parts`: each part's keys), after `check_parts`, and passed
    through `finish(path, value)` as soon as its part is restored (a cast or a quantization: the
    restored values of only the parts in flight are held at once).

    A single process restores `RESTORE_THREADS` parts at a time, each in a copy of the caller's context
    (an `ocp.Context` entered around the load applies). Processes of a multi-process mesh restore one part
    at a time: Orbax names the barriers of a load by a process-wide counter, which concurrent loads would
    advance in a different order in each process."""
    check_parts(directory, parts, abstract)
    paths = {manifest_key(path): path for path in abstract}

    def restore(index: int, keys: Sequence[str]) -> dict[tuple[Any, ...], jax.Array]:
        wanted = {paths[k]: abstract[paths[k]] for k in keys}
        restored = ocp.load(part_dir(directory, index), nest(wanted))
        return {path: finish(path, lookup(restored, path)) for path in wanted}

    values: dict[tuple[Any, ...], jax.Array] = {}
    with ThreadPoolExecutor(RESTORE_THREADS if jax.process_count() == 1 else 1) as pool:
        futures = [pool.submit(contextvars.copy_context().run, restore, i, keys) for i, keys in enumerate(parts)]
        for future in futures:
            values.update(future.result())
    return values


def check_parts(directory: str, parts: Sequence[Sequence[str]], abstract: Mapping[tuple[Any, ...], Any]) -> None:
    """Raises one `ValueError` naming the parameters no part holds, the keys the model lacks and the keys
    listed twice, before anything is read."""
    listed = Counter(k for keys in parts for k in keys)
    expected = {manifest_key(path) for path in abstract}
    problems = []
    for what, keys in (
        ("no part holds", expected - set(listed)),
        ("the model has no", set(listed) - expected),
        ("more than one part lists", {k for k, n in listed.items() if n > 1}),
    ):
        if keys:
            problems.append(f"{what} {len(keys)} parameters: {named_keys(sorted(keys))}")
    if problems:
        raise ValueError(
            f"{directory}: the parts do not match the model ({'; '.join(problems)}). The directory is incomplete "
            "or was converted for another model: convert the .safetensors file again."
        )
