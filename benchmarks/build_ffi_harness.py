"""Builds the CUDA all-to-all's virtual-rank harness (`csrc/all2all_harness.cu`), prints its path.

    python benchmarks/build_ffi_harness.py [--out DIR] [--arch sm_80]
    DIR/all2all_harness [--blocks B] [--iters K] [n ...]   # n virtual ranks on one GPU; prints ALL PASSED

The harness is a developer check of the kernels without JAX; the library itself is built by
`python -m ltx_jax.ffi.build`.
"""

import argparse
from pathlib import Path

from ltx_jax.ffi import build, paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="directory to write it to (default: the library's cache folder)")
    parser.add_argument(
        "--arch",
        help=f"nvcc -arch, e.g. sm_80 (default: ${paths.ARCH_ENV}, else the first GPU's, else {paths.DEFAULT_ARCH})",
    )
    args = parser.parse_args()
    print(build.build_harness(args.out, arch=args.arch))


if __name__ == "__main__":
    main()
