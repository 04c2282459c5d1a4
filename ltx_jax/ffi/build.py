"""Builds the CUDA peer-to-peer all-to-all of `csrc/` with nvcc: `python -m ltx_jax.ffi.build [--harness] [--arch A]`.

The library (`build/ffi/libltx_all2all.so` in the checkout) holds the kernels and the XLA FFI
handlers, compiled against the XLA FFI headers of the installed jax (`jax.ffi.include_dir()`) for
the GPU architecture given by `--arch`, else `$LTX_JAX_CUDA_ARCH`, else sm_90 (Hopper). The
kernels need sm_70 or newer (system-scope acquire/release); e.g. sm_80 for A100, sm_100 for B200.
The harness is the standalone virtual-rank test program.
"""

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import jax

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "csrc"
BUILD_DIR = REPO / "build" / "ffi"
LIBRARY_NAME = "libltx_all2all.so"
HARNESS_NAME = "all2all_harness"
DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"
ARCH_ENV = "LTX_JAX_CUDA_ARCH"
DEFAULT_ARCH = "sm_90"  # H100/H200
MIN_ARCH = 70  # ld.acquire.sys / red.release.sys
LIBRARY_SOURCES = ("all2all.cu", "all2all_comm.cu", "all2all_ffi.cc")
HARNESS_SOURCES = ("all2all.cu", "all2all_comm.cu", "all2all_harness.cu")


def resolve_arch(arch: str | None = None) -> str:
    """`arch`, else `$LTX_JAX_CUDA_ARCH`, else sm_90, checked: `sm_XY` or `compute_XY` with XY >= 70.

    Raises `ValueError` naming the value and the expected form.
    """
    value = arch or os.environ.get(ARCH_ENV) or DEFAULT_ARCH
    match = re.fullmatch(r"(sm|compute)_(\d+)[af]?", value)
    if match is None or int(match.group(2)) < MIN_ARCH:
        source = "arch" if arch else ARCH_ENV if os.environ.get(ARCH_ENV) else "the default"
        raise ValueError(
            f"{source}={value!r} is not a CUDA architecture this all-to-all supports; pass an nvcc -arch value "
            f"like 'sm_90' (H100/H200), 'sm_80' (A100) or 'sm_100' (B200), at least sm_{MIN_ARCH}."
        )
    return value


def find_nvcc() -> str:
    """nvcc from PATH, `$CUDA_HOME/bin` or the default toolkit. Raises `RuntimeError` saying how to get one."""
    candidates = [shutil.which("nvcc")]
    if os.environ.get("CUDA_HOME"):
        candidates.append(str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"))
    candidates.append(DEFAULT_NVCC)
    for path in candidates:
        if path and Path(path).is_file():
            return path
    raise RuntimeError(
        "Building ltx-jax's CUDA all-to-all needs nvcc, which is neither on PATH nor in $CUDA_HOME/bin. "
        "Install the CUDA toolkit (12.4 or newer) or set CUDA_HOME; backend='all_to_all' needs no build."
    )


def _sources(*names: str) -> list[str]:
    paths = [CSRC / name for name in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RuntimeError(f"CUDA sources not found: {missing}. Build from a source checkout of ltx-jax.")
    return [str(p) for p in paths]


def _run(command: list[str], output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"nvcc failed (exit {result.returncode}):\n{' '.join(command)}\n{result.stderr[-4000:]}")
    return output


def library_command(nvcc: str, output: Path, arch: str | None = None) -> list[str]:
    """The nvcc command line that builds the shared library into `output` (arch: see `resolve_arch`)."""
    return [
        nvcc,
        "-O3",
        "-std=c++17",
        f"-arch={resolve_arch(arch)}",
        "-shared",
        "-Xcompiler=-fPIC,-Wall",
        "-isystem",
        jax.ffi.include_dir(),
        f"-I{CSRC}",
        *_sources(*LIBRARY_SOURCES),
        "-o",
        str(output),
    ]


def build(build_dir: Path = BUILD_DIR, *, nvcc: str | None = None, arch: str | None = None) -> Path:
    """Compiles the library into `build_dir` and returns its path. Raises `RuntimeError` on failure.

    `arch` is nvcc's -arch; None takes `$LTX_JAX_CUDA_ARCH`, else sm_90.
    """
    output = Path(build_dir) / LIBRARY_NAME
    return _run(library_command(nvcc or find_nvcc(), output, arch), output)


def build_harness(build_dir: Path = BUILD_DIR, *, nvcc: str | None = None, arch: str | None = None) -> Path:
    """Compiles the virtual-rank harness (`all2all_harness [--blocks B] [--iters K] [n ...]`)."""
    output = Path(build_dir) / HARNESS_NAME
    sources = _sources(*HARNESS_SOURCES)
    command = [nvcc or find_nvcc(), "-O3", "-std=c++17", f"-arch={resolve_arch(arch)}", "-lineinfo", f"-I{CSRC}"]
    command += sources
    return _run([*command, "-o", str(output)], output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    parser.add_argument("--arch", help=f"nvcc -arch, e.g. sm_80 (default: ${ARCH_ENV}, else {DEFAULT_ARCH})")
    parser.add_argument("--harness", action="store_true", help="also build the virtual-rank harness")
    args = parser.parse_args()
    print(build(args.build_dir, arch=args.arch))  # noqa: T201
    if args.harness:
        print(build_harness(args.build_dir, arch=args.arch))  # noqa: T201


if __name__ == "__main__":
    main()
