"""The host transpose of conversion (`state_dict.transpose`) against a plain `ascontiguousarray(a.T)`, on
the shapes of LTX-2.3's Linear weights (bf16, torch `[out, in]` layout), one thread.

    python benchmarks/bench_transpose.py [--repeats 3]

Each line: GB/s of the weight's bytes, best of `--repeats`, for each way.
"""

import argparse
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np

from ltx_jax.convert.state_dict import transpose

SHAPES = [(4096, 16384), (16384, 4096), (4096, 4096), (2048, 2048), (36864, 4096)]


def plain(matrix: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(matrix.view(np.uint16).T).view(matrix.dtype)


def best_rate(way: Callable[[np.ndarray], np.ndarray], matrix: np.ndarray, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        way(matrix)
        seconds.append(time.perf_counter() - start)
    return matrix.nbytes / 1e9 / min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        matrix = rng.integers(0, 2**16, shape, dtype=np.uint16).view(ml_dtypes.bfloat16)
        if not np.array_equal(transpose(matrix).view(np.uint16), matrix.view(np.uint16).T):
            raise AssertionError(f"transpose of {shape} is wrong")
        rates = {name: best_rate(way, matrix, args.repeats) for name, way in (("tiled", transpose), ("plain", plain))}
        print(f"{shape}: " + ", ".join(f"{name} {rate:.2f} GB/s" for name, rate in rates.items()), flush=True)


if __name__ == "__main__":
    main()
