"""Builds the CUDA peer-to-peer all-to-all with nvcc: `python -m ltx_jax.ffi.build` prints the library's path.

The sources are the repository's `csrc/`, which a wheel carries as `ltx_jax/ffi/csrc` (`sources_dir`
finds either); the library goes to the build cache folder for the installed jax, the GPU
architecture and the sources (`ltx_jax.ffi.paths`), where `load_library` looks for it. It holds the
kernels and the XLA FFI handlers, compiled against the XLA FFI headers of the installed jax
(`jax.ffi.include_dir()`) for `$LTX_JAX_CUDA_ARCH`, else the architecture of the first GPU JAX sees,
else sm_90 (Hopper). The kernels need sm_70 or newer (system-scope acquire/release); e.g. sm_80 for
A100, sm_100 for B200. `build_harness` compiles the standalone virtual-rank test program
(`benchmarks/build_ffi_harness.py` in a source checkout).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax

from ltx_jax.ffi.paths import (
    ARCH_ENV,
    BUILD_COMMAND,
    CACHE_ENV,
    LIBRARY_NAME,
    library_dir,
    resolve_arch,
    sources_dir,
)

HARNESS_NAME = "all2all_harness"
DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"
LIBRARY_SOURCES = ("all2all.cu", "all2all_comm.cu", "all2all_ffi.cc")
HARNESS_SOURCES = ("all2all.cu", "all2all_comm.cu", "all2all_harness.cu")


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
    paths = [sources_dir() / name for name in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RuntimeError(f"CUDA sources not found: {missing}. Reinstall ltx-jax; its wheel holds them.")
    return [str(p) for p in paths]


def _compile(command: list[str], output: Path) -> Path:
    """Runs nvcc into a temporary file, then renames it to `output`.

    The rename is atomic: a process loading the library never maps a half-written file, and one that
    already mapped the old build keeps it.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.{os.getpid()}.partial")
    result = subprocess.run([*command, "-o", str(partial)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"nvcc failed (exit {result.returncode}):\n{' '.join(command)}\n{result.stderr[-4000:]}")
    os.replace(partial, output)
    return output


def library_command(nvcc: str, arch: str | None = None) -> list[str]:
    """The nvcc command line that builds the shared library, without `-o` (arch: see `resolve_arch`)."""
    return [
        nvcc,
        "-O3",
        "-std=c++17",
        f"-arch={resolve_arch(arch)}",
        "-shared",
        "-Xcompiler=-fPIC,-Wall",
        "-isystem",
        jax.ffi.include_dir(),
        f"-I{sources_dir()}",
        *_sources(*LIBRARY_SOURCES),
    ]


def build(build_dir: Path | None = None, *, nvcc: str | None = None, arch: str | None = None) -> Path:
    """Compiles the library and returns its path. Raises `RuntimeError` on failure.

    Args:
        build_dir: where to write it; None is the build cache folder that `load_library` looks in.
        nvcc: the compiler; None finds one (`find_nvcc`).
        arch: nvcc's -arch; None takes `$LTX_JAX_CUDA_ARCH`, else the first GPU's, else sm_90.
    """
    arch = resolve_arch(arch)
    output = Path(build_dir or library_dir(arch)) / LIBRARY_NAME
    return _compile(library_command(nvcc or find_nvcc(), arch), output)


def build_harness(build_dir: Path | None = None, *, nvcc: str | None = None, arch: str | None = None) -> Path:
    """Compiles the virtual-rank harness (`all2all_harness [--blocks B] [--iters K] [n ...]`); arguments as `build`."""
    arch = resolve_arch(arch)
    output = Path(build_dir or library_dir(arch)) / HARNESS_NAME
    command = [nvcc or find_nvcc(), "-O3", "-std=c++17", f"-arch={arch}", "-lineinfo", f"-I{sources_dir()}"]
    return _compile([*command, *_sources(*HARNESS_SOURCES)], output)


def main() -> None:
    # Settings come from the environment, so the process that loads the library resolves the same folder.
    if sys.argv[1:]:
        raise SystemExit(
            f"`{BUILD_COMMAND}` takes no arguments, got {sys.argv[1:]}. Set {ARCH_ENV} (e.g. sm_80) for another "
            f"GPU and {CACHE_ENV} for another cache folder; in a source checkout, "
            "`python benchmarks/build_ffi_harness.py` builds the virtual-rank harness."
        )
    print(build())  # noqa: T201


if __name__ == "__main__":
    main()
