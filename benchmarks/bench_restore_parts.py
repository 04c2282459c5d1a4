"""What bounds loading a converted directory: `orbax_parts.restore_parts` against its own pieces, on one device.

    python benchmarks/bench_restore_parts.py /dev/shm/parts [--gigabytes 12] [--part-mb 256 1024] \
        [--threads 1 8 16 32] [--repeats 2]

Writes `--gigabytes` of bf16 matrices shaped like one LTX-2.3 block's linears (4096 x 4096, 4096 x 16384,
16384 x 4096; random bits) as `PartWriter` writes a converted checkpoint, once per `--part-mb`, into
`DIR/<gigabytes>GB-<part-mb>MB` (kept: a second run reads what the first wrote). Then, per part size and per
thread count (`RESTORE_THREADS`, or that many files or arrays at a time), median of `--repeats` after one
unmeasured run:
    files       every file of the parts read into fresh host buffers: the storage's floor
    put         `jax.device_put` of host arrays of the same shapes, waited for: the transfer's floor
    host        `restore_parts` onto the CPU device: Orbax's read, and a copy into the CPU device's buffers
    device      `restore_parts` onto the default device, as `load_checkpoint` restores
    host+put    each part restored onto the CPU device, then its arrays put on the default device in the
                same thread: the read and the transfer as separate steps
Before them, the fixed cost of one `ocp.load` (a part of one 1 KB array, median of 20). If `device` runs
well below both `host` and `put`, how Orbax moves a restored array to the device is the lever.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding
from orbax.checkpoint import v1 as ocp

from ltx_jax.convert import orbax_parts

SHAPES = [(4096, 4096)] * 8 + [(4096, 16384), (16384, 4096)]  # one LTX-2.3 block's large linears
Abstract = dict[tuple[str, ...], jax.ShapeDtypeStruct]


def shapes_up_to(gigabytes: float) -> dict[tuple[str, ...], tuple[int, int]]:
    shapes, total = {}, 0
    while total < gigabytes * 1e9:
        shape = SHAPES[len(shapes) % len(SHAPES)]
        shapes[("blocks", str(len(shapes)), "kernel")] = shape
        total += 2 * shape[0] * shape[1]
    return shapes


def write_parts(directory: str, shapes: dict[tuple[str, ...], tuple[int, int]], part_mb: int) -> list[list[str]]:
    """The parts under `directory` (written unless its manifest is there), as the manifest lists them."""
    manifest = os.path.join(directory, "parts.txt")
    if os.path.exists(manifest):
        return [line.split() for line in Path(manifest).read_text().splitlines()]
    rng = np.random.default_rng(0)
    orbax_parts.PART_BYTES = part_mb * 2**20
    writer = orbax_parts.PartWriter(directory)
    start = time.perf_counter()
    for path, shape in shapes.items():
        writer.add(path, np.frombuffer(rng.bytes(2 * shape[0] * shape[1]), jax.numpy.bfloat16).reshape(shape))
    parts = writer.close()
    print(f"wrote {len(parts)} parts of {part_mb} MB in {time.perf_counter() - start:.1f} s", flush=True)
    Path(manifest).write_text("\n".join(" ".join(keys) for keys in parts))
    return parts


def on(device: jax.Device, shapes: dict[tuple[str, ...], tuple[int, int]]) -> Abstract:
    sharding = SingleDeviceSharding(device)
    return {path: jax.ShapeDtypeStruct(shape, jax.numpy.bfloat16, sharding=sharding) for path, shape in shapes.items()}


def fixed_load_cost(directory: str) -> float:
    tiny = os.path.join(directory, "tiny")
    if not os.path.exists(tiny):
        ocp.save(tiny, {"a": np.zeros(512, np.float16)})
    abstract = {"a": jax.ShapeDtypeStruct((512,), np.float16, sharding=SingleDeviceSharding(jax.devices()[0]))}
    return statistics.median(timed(lambda: ocp.load(tiny, abstract)) for _ in range(20))


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    jax.block_until_ready(work())
    return time.perf_counter() - start


@contextlib.contextmanager
def restore_threads(threads: int) -> Iterator[None]:
    before, orbax_parts.RESTORE_THREADS = orbax_parts.RESTORE_THREADS, threads
    try:
        yield
    finally:
        orbax_parts.RESTORE_THREADS = before


def ways(
    directory: str, parts: list[list[str]], host_arrays: dict[tuple[str, ...], np.ndarray], threads: int
) -> dict[str, Callable[[], object]]:
    """The ways timed (module docstring), each over every part under `directory` with `threads` at once;
    `host_arrays` holds arrays of the parts' shapes."""
    cpu, device = jax.devices("cpu")[0], jax.devices()[0]
    files = [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
    shapes = {path: array.shape for path, array in host_arrays.items()}

    def in_pool(job: Callable, items: list) -> Callable[[], list]:
        def run() -> list:
            with ThreadPoolExecutor(threads) as pool:
                return list(pool.map(job, items))

        return run

    def read_file(name: str) -> int:
        with open(name, "rb", buffering=0) as f:
            return len(f.read())

    def put(path: tuple[str, ...]) -> jax.Array:
        return jax.device_put(host_arrays[path], device).block_until_ready()

    def restore(target: jax.Device) -> Callable[[], dict]:
        def run() -> dict:
            with restore_threads(threads):
                return orbax_parts.restore_parts(directory, parts, on(target, shapes))

        return run

    def restore_then_put() -> dict:
        def then_put(_: tuple[str, ...], value: jax.Array) -> jax.Array:
            return jax.device_put(value, device).block_until_ready()

        with restore_threads(threads):
            return orbax_parts.restore_parts(directory, parts, on(cpu, shapes), then_put)

    return {
        "files": in_pool(read_file, files),
        "put": in_pool(put, list(host_arrays)),
        "host": restore(cpu),
        "device": restore(device),
        "host+put": restore_then_put,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory")
    parser.add_argument("--gigabytes", type=float, default=12.0)
    parser.add_argument("--part-mb", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    shapes = shapes_up_to(args.gigabytes)
    nbytes = sum(2 * a * b for a, b in shapes.values())
    device = jax.devices()[0]
    print(f"{device.device_kind}; jax {jax.__version__}; {os.cpu_count()} cores; {nbytes / 1e9:.2f} GB", flush=True)
    host_arrays = {path: np.ones(shape, jax.numpy.bfloat16) for path, shape in shapes.items()}
    os.makedirs(args.directory, exist_ok=True)
    print(f"one ocp.load of a 1 KB part: {1e3 * fixed_load_cost(args.directory):.1f} ms", flush=True)
    for part_mb in args.part_mb:
        directory = os.path.join(args.directory, f"{args.gigabytes:g}GB-{part_mb}MB")
        parts = write_parts(directory, shapes, part_mb)
        for threads in args.threads:
            for way, work in ways(directory, parts, host_arrays, threads).items():
                timed(work)
                seconds = [timed(work) for _ in range(args.repeats)]
                median = statistics.median(seconds)
                runs = ", ".join(f"{s:.2f}" for s in seconds)
                print(
                    f"{part_mb:5d} MB parts, {threads:2d} threads, {way:>8}: {median:6.2f} s, "
                    f"{nbytes / 1e9 / median:5.2f} GB/s (runs: {runs} s)",
                    flush=True,
                )


if __name__ == "__main__":
    sys.exit(main())
