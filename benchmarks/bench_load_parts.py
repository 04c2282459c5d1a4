"""What bounds loading the DiT from a `.safetensors` file: its reads alone, its host-to-device transfers
alone, and both together as the loader runs them, on one device, the page cache warm.

    python benchmarks/bench_load_parts.py /tmp/synth/ltx-2.3-22b-dev.safetensors [--gigabytes 8] \
        [--threads 16] [--repeats 2]

The DiT's tensors (`model.diffusion_model.` keys) in file order, up to `--gigabytes`, read once before
timing so that the page cache holds them. Per repeat, `--threads` tensors at a time through the
loader's own `placement.place_concurrently` (its `LOAD_THREADS` set to `--threads`):
    read      `SafetensorsFile.read` of each tensor into a fresh host buffer (the loader's read)
    put       `jax.device_put` of the arrays `read` returned, waited for
    read+put  each thread reads a tensor, then puts it and waits, as the loader does (without the device
              transposes of Linear weights)
If read+put runs near the slower of read and put, that part bounds loading; if well below both, the two
contend (for the GIL, memory bandwidth or the copy engine) and overlapping them is the lever.
"""

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import jax
import numpy as np

from ltx_jax.convert import placement
from ltx_jax.convert.safetensors_file import SafetensorsFile

DIT_PREFIX = "model.diffusion_model."


def dit_keys(file: SafetensorsFile, gigabytes: float) -> list[str]:
    """The DiT's keys in file order whose bytes add up to at most `gigabytes`."""
    keys = sorted((k for k in file.keys() if k.startswith(DIT_PREFIX)), key=lambda k: file.info(k).offset)
    chosen, total = [], 0
    for key in keys:
        size = file.info(key).nbytes
        if total + size > gigabytes * 1e9:
            break
        chosen.append(key)
        total += size
    if not chosen:
        raise ValueError(f"no DiT tensor ({DIT_PREFIX}*) fits in --gigabytes {gigabytes}; give more.")
    return chosen


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--gigabytes", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    file = SafetensorsFile(args.checkpoint)
    keys = dit_keys(file, args.gigabytes)
    nbytes = sum(file.info(k).nbytes for k in keys)
    device = jax.devices()[0]
    for key in keys:  # into the page cache
        file.read(key)
    size = f"{len(keys)} tensors, {nbytes / 1e9:.2f} GB"
    print(f"{device.device_kind}; jax {jax.__version__}; {size}; {args.threads} threads", flush=True)

    placement.LOAD_THREADS = args.threads
    sizes = {key: file.info(key).nbytes for key in keys}

    def concurrently(job: Callable[[str], object]) -> dict:
        return placement.place_concurrently({k: functools.partial(job, k) for k in keys}, sizes, "", progress=False)

    def read() -> dict[str, np.ndarray]:
        return concurrently(file.read)

    def put(arrays: dict[str, np.ndarray]) -> None:
        concurrently(lambda key: jax.device_put(arrays[key], device))

    def read_and_put() -> None:
        concurrently(lambda key: jax.device_put(file.read(key), device))

    arrays = read()
    rows: dict[str, list[float]] = {"read": [], "put": [], "read+put": []}
    for _ in range(args.repeats):
        rows["read"].append(timed(read))
        rows["put"].append(timed(lambda: put(arrays)))
        rows["read+put"].append(timed(read_and_put))
    for part, seconds in rows.items():
        median = statistics.median(seconds)
        runs = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"{part:>9}: {median:6.2f} s, {nbytes / 1e9 / median:5.2f} GB/s (runs: {runs} s)", flush=True)


if __name__ == "__main__":
    main()
