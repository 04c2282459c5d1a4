"""What bounds loading the DiT from a `.safetensors` file: its reads alone, its host-to-device transfers
alone, and both together as the loader runs them, on one device, the page cache warm.

    python benchmarks/bench_load_parts.py /tmp/synth/ltx-2.3-22b-dev.safetensors [--gigabytes 8] \
        [--threads 4 16] [--repeats 2]

The DiT's tensors (`model.diffusion_model.` keys) in file order, up to `--gigabytes`, read once before
timing so that the page cache holds them. Per thread count of `--threads` and per repeat, that many
tensors at a time through the loader's own `placement.place_concurrently` (its `LOAD_THREADS` set):
    read      `SafetensorsFile.read` of each tensor into a fresh host buffer (the loader's read)
    reread    the same reads into the buffers `read` returned, already mapped: read less its page faults
    put       `jax.device_put` of the arrays `read` returned, waited for
    read+put  each thread reads a tensor, then puts it and waits, as the loader does (without the device
              transposes of Linear weights)
    mmap+put  `jax.device_put` of each tensor's bytes in a memory map of the file: no read into a buffer
    place     `placement.place_parameter` as `load_checkpoint` calls it: read, `make_array_from_callback`,
              and the device transpose of a Linear weight (`expected_keys` says which)
    place-T   the same without transposing (every tensor placed as it is stored)
Before them, the time `load_checkpoint` spends before placing anything: the abstract model and its table.
If read+put runs near the slower of read and put, that part bounds loading; if well below both, the two
contend (for the GIL, memory bandwidth or the copy engine) and overlapping them is the lever.
"""

import argparse
import functools
import mmap
import statistics
import time
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

from ltx_jax.convert import placement
from ltx_jax.convert.dit_tensors import checkpoint_config
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys
from ltx_jax.model.model import LTXModel


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
    parser.add_argument("--threads", type=int, nargs="+", default=[16])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    file = SafetensorsFile(args.checkpoint)
    keys = dit_keys(file, args.gigabytes)
    nbytes = sum(file.info(k).nbytes for k in keys)
    device = jax.devices()[0]
    arrays = {key: file.read(key) for key in keys}  # into the page cache
    print(f"{device.device_kind}; jax {jax.__version__}; {len(keys)} tensors, {nbytes / 1e9:.2f} GB", flush=True)
    with open(args.checkpoint, "rb") as f:  # left open: the arrays put from it may still view it (CPU)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    start = time.perf_counter()
    model = LTXModel.abstract(checkpoint_config(file, None)[0], jax.numpy.bfloat16)
    abstract = time.perf_counter() - start
    table = expected_keys(model)
    print(f"abstract model {abstract:.2f} s, its table {time.perf_counter() - start - abstract:.2f} s", flush=True)
    # a connector's tensors are not the DiT's (their loader places them as stored)
    transposed = {key: table.get(key.removeprefix(DIT_PREFIX), (None, False))[1] for key in keys}
    parts = load_parts(file, keys, arrays, mapped, device) | place_parts(file, transposed, device)
    for threads in args.threads:
        placement.LOAD_THREADS = threads
        rows: dict[str, list[float]] = {part: [] for part in parts}
        for _ in range(args.repeats):
            for part, work in parts.items():
                rows[part].append(timed(work))
        for part, seconds in rows.items():
            median = statistics.median(seconds)
            runs = ", ".join(f"{s:.2f}" for s in seconds)
            rate = f"{nbytes / 1e9 / median:5.2f} GB/s"
            print(f"{threads:3d} threads {part:>9}: {median:6.2f} s, {rate} (runs: {runs} s)", flush=True)


def load_parts(
    file: SafetensorsFile, keys: list[str], arrays: dict[str, np.ndarray], mapped: mmap.mmap, device: jax.Device
) -> dict[str, Callable[[], object]]:
    """The parts timed (see the module docstring), each over all `keys` through `place_concurrently`."""
    sizes = {key: file.info(key).nbytes for key in keys}

    def concurrently(job: Callable[[str], object]) -> Callable[[], object]:
        jobs = {key: functools.partial(job, key) for key in keys}
        return lambda: placement.place_concurrently(jobs, sizes, "", progress=False)

    def reread(key: str) -> None:
        info = file.info(key)
        with open(file.path, "rb", buffering=0) as f:
            f.seek(info.offset)
            f.readinto(memoryview(arrays[key].reshape(-1).view(np.uint8)))

    def mapped_array(key: str) -> np.ndarray:
        info = file.info(key)
        return np.frombuffer(mapped, info.dtype, int(np.prod(info.shape)), info.offset).reshape(info.shape)

    return {
        "read": concurrently(file.read),
        "reread": concurrently(reread),
        "put": concurrently(lambda key: jax.device_put(arrays[key], device)),
        "read+put": concurrently(lambda key: jax.device_put(file.read(key), device)),
        "mmap+put": concurrently(lambda key: jax.device_put(mapped_array(key), device)),
    }


def place_parts(file: SafetensorsFile, transposed: dict[str, bool], device: jax.Device) -> dict:
    """`place` and `place-T` of the module docstring."""
    sizes = {key: file.info(key).nbytes for key in transposed}

    def place(key: str, transpose: bool) -> jax.Array:
        shape = file.info(key).shape
        read = functools.partial(file.read, key)
        return placement.place_parameter(shape, transpose, lambda _: SingleDeviceSharding(device), read)

    def placed(transpose: Callable[[str], bool]) -> Callable[[], object]:
        jobs = {key: functools.partial(place, key, transpose(key)) for key in transposed}
        return lambda: placement.place_concurrently(jobs, sizes, "", progress=False)

    return {"place": placed(transposed.__getitem__), "place-T": placed(lambda _: False)}


if __name__ == "__main__":
    main()
