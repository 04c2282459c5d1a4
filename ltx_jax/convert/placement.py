"""Reading a checkpoint's tensors straight into their place on the mesh.

`make_array_from_reader` asks a reader once per process for the one box of the parameter that this
process's devices hold, so no process reads (or holds on the host) the other processes' shards, and
a replicated parameter is read once per process, not once per device. A parameter stored transposed
is transposed on the devices (`make_transposed_array_from_reader`).
"""

import functools
import math
import sys
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
from jax.sharding import NamedSharding, Sharding
from jax.sharding import PartitionSpec as P

from ltx_jax.parallel.launch import launched

# Tensors read and placed at once. The 38 GB LTX-2.3 DiT loaded on an H200 in 12.1 s with 8 of them,
# 8.8 s with 16 and 9.9 s with 32 (bench_load.py --load-threads; benchmarks/results/2026-12-03/README.md,
# "Fourth round").
LOAD_THREADS = 16


def local_box(shape: tuple[int, ...], sharding: Sharding) -> tuple[slice, ...]:
    """The smallest box of an array of `shape` holding every shard of this process's devices under
    `sharding` (their union when, as on `make_mesh`'s meshes, a process's devices are consecutive)."""
    boxes = [_explicit(index, shape) for index in sharding.addressable_devices_indices_map(shape).values()]
    if not boxes:
        raise ValueError(
            f"process {jax.process_index()} holds no device of this sharding ({sharding}); every process must "
            "own devices of the mesh it loads onto (make_mesh's meshes span all processes)."
        )
    return tuple(
        slice(min(b[axis].start for b in boxes), max(b[axis].stop for b in boxes)) for axis in range(len(shape))
    )


def make_array_from_reader(
    shape: tuple[int, ...], sharding: Sharding, read: Callable[[tuple[slice, ...]], np.ndarray]
) -> jax.Array:
    """A global array of `shape` placed by `sharding`, each process calling `read(box)` exactly once for
    its `local_box` (a step-1 slice per axis; the whole array when replicated) and cutting its
    devices' shards out of that block."""
    box = local_box(shape, sharding)
    block = read(box)
    expected = tuple(s.stop - s.start for s in box)
    if tuple(block.shape) != expected:
        raise ValueError(f"make_array_from_reader: read({box}) returned shape {block.shape}, expected {expected}.")

    def shard(index: tuple[slice, ...]) -> np.ndarray:
        within = zip(_explicit(index, shape), box, strict=True)
        return block[tuple(slice(s.start - b.start, s.stop - b.start) for s, b in within)]

    return jax.make_array_from_callback(shape, sharding, shard)


def _explicit(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """A device's index with explicit bounds (`slice(None)` -> `slice(0, n)`)."""
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(index, shape, strict=True))


def mirrored(sharding: Sharding, ndim: int) -> Sharding:
    """The sharding of the transposed (axes reversed) array whose transpose `sharding` places."""
    if not isinstance(sharding, NamedSharding):
        return sharding  # one device: nothing to mirror
    spec = tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec))
    return NamedSharding(sharding.mesh, P(*reversed(spec)))


@functools.cache
def _transpose_into(sharding: Sharding) -> Callable[[jax.Array], jax.Array]:
    return launched(jax.jit(lambda x: x.T, out_shardings=sharding))


def make_transposed_array_from_reader(
    shape: tuple[int, ...], sharding: Sharding, read: Callable[[tuple[slice, ...]], np.ndarray]
) -> jax.Array:
    """`make_array_from_reader` for an array stored transposed (a torch `[out, in]` Linear weight for a JAX
    `[in, out]` kernel): `read(box)` takes a box of the stored layout. The stored layout goes to the
    devices as it is, under the mirrored sharding, and is transposed there, at device bandwidth: the
    host never transposes (0.9 GB/s against the 7 GB/s of the transfer on an H200), and each shard's
    transpose is local, with no communication."""
    stored = make_array_from_reader(tuple(reversed(shape)), mirrored(sharding, len(shape)), read)
    return _transpose_into(sharding)(stored)


def place_parameter(
    torch_shape: tuple[int, ...],
    transposed: bool,
    sharding_for: Callable[[tuple[int, ...]], Sharding],
    read: Callable[[tuple[slice, ...]], np.ndarray],
) -> jax.Array:
    """A parameter stored in torch layout `torch_shape` (`read(box)` reads a box of it), placed in JAX layout
    (reversed axes where `transposed`) under `sharding_for(jax_shape)`."""
    shape = tuple(reversed(torch_shape)) if transposed else tuple(torch_shape)
    place_from = make_transposed_array_from_reader if transposed else make_array_from_reader
    return place_from(shape, sharding_for(shape), read)


def place_table(
    table: Mapping[str, tuple[tuple, bool, tuple[int, ...], np.dtype]],
    place: Callable[[str, bool, tuple[int, ...], np.dtype], jax.Array],
    label: str,
    progress: bool,
) -> dict[tuple, jax.Array]:
    """Parameter path -> `place(key, transposed, torch_shape, dtype)` for every entry of an
    `expected_keys` table, concurrently (`place_concurrently`)."""
    jobs = {
        path: functools.partial(place, key, transposed, shape, dtype)
        for key, (path, transposed, shape, dtype) in table.items()
    }
    sizes = {path: math.prod(shape) * np.dtype(dtype).itemsize for path, _, shape, dtype in table.values()}
    return place_concurrently(jobs, sizes, label, progress)


def place_concurrently(
    jobs: Mapping[Hashable, Callable[[], jax.Array]], sizes: Mapping[Hashable, int], label: str, progress: bool
) -> dict[Hashable, jax.Array]:
    """`{name: job()}`, `LOAD_THREADS` jobs at a time, with a progress bar of their `sizes` (bytes).

    Reads (which release the GIL), host-to-device transfers and device transposes of several tensors
    overlap; each thread holds one tensor on the host at a time and waits until its arrays are on the
    devices before it takes the next, so at most `LOAD_THREADS` tensors are in flight: transfers are
    asynchronous, and unbounded they would hold the stored and the transposed copy of many tensors
    on the devices at once."""
    bar = Progress(sum(sizes.values()), label, progress)
    try:
        with ThreadPoolExecutor(LOAD_THREADS) as pool:
            futures = {name: pool.submit(lambda job=job: jax.block_until_ready(job())) for name, job in jobs.items()}
            values = {}
            for name, future in futures.items():
                values[name] = future.result()
                bar.update(sizes[name])
    finally:
        bar.close()
    return values


class Progress:
    """A one-line progress bar on stderr (a line per 10% when stderr is not a terminal)."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.total, self.label, self.enabled = max(total, 1), label, enabled
        self.done, self.start, self._shown = 0, time.perf_counter(), -1

    def update(self, amount: int) -> None:
        self.done += amount
        if not self.enabled:
            return
        percent = 100 * self.done // self.total
        if sys.stderr.isatty():
            bar = "#" * (percent // 4)
            rate = self.done / 1e6 / max(time.perf_counter() - self.start, 1e-9)
            self._write(f"\r{self.label} [{bar:<25}] {percent:3d}% {self.done / 1e9:.2f} GB {rate:.0f} MB/s")
        elif percent // 10 > self._shown:
            self._shown = percent // 10
            self._write(f"{self.label}: {percent}%\n")

    def close(self) -> None:
        if self.enabled and sys.stderr.isatty():
            self._write("\n")

    @staticmethod
    def _write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()
