"""Where the CUDA all-to-all's sources and built library live, for any install of ltx-jax.

The sources live at the repository's top level (`csrc/`); a wheel carries them inside the package
(`ltx_jax/ffi/csrc`, package data added by setup.py), so an installed wheel can build them, and an
editable install reads them from the checkout. The library is a per-user build product in a cache
directory (`$LTX_JAX_CACHE_DIR`, else `$XDG_CACHE_HOME/ltx_jax`, else `~/.cache/ltx_jax`), in a
folder named after everything the binary depends on: the jax version whose FFI headers it is
compiled against, the GPU architecture and a hash of the sources. Upgrading jax or ltx-jax therefore
never loads a stale build; it finds none and says how to build one. `$LTX_JAX_FFI_LIBRARY` names a
prebuilt copy instead.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import re
from pathlib import Path

import jax

from ltx_jax.devices import cuda_compute_capability
from ltx_jax.user_cache import CACHE_ENV, cache_dir

LIBRARY_ENV = "LTX_JAX_FFI_LIBRARY"  # path of a prebuilt libltx_all2all.so
ARCH_ENV = "LTX_JAX_CUDA_ARCH"
LIBRARY_NAME = "libltx_all2all.so"
BUILD_COMMAND = "python -m ltx_jax.ffi.build"
DEFAULT_ARCH = "sm_90"  # H100/H200
MIN_ARCH = 70  # ld.acquire.sys / red.release.sys
SOURCE_SUFFIXES = (".cu", ".cc", ".h", ".cuh")
SOURCE_HASH_CHARS = 12


def source_dirs() -> tuple[Path, Path]:
    """Where the CUDA sources may be: inside the installed package (a wheel), then the checkout's `csrc/`."""
    installed = Path(str(importlib.resources.files("ltx_jax.ffi") / "csrc"))
    checkout = Path(__file__).resolve().parents[2] / "csrc"  # resolved: a strict editable install links files
    return installed, checkout


def sources_dir() -> Path:
    """The CUDA sources: the package's (a wheel), else the checkout's (an editable install).

    Raises `RuntimeError` naming both places if neither exists.
    """
    installed, checkout = source_dirs()
    for sources in (installed, checkout):
        if sources.is_dir():
            return sources
    raise RuntimeError(
        f"ltx-jax's CUDA sources are neither in the installed package ({installed}, the package data "
        f"ltx_jax/ffi/csrc of a wheel) nor in a source checkout ({checkout}, the repository's csrc/ of an "
        f"editable install). Reinstall ltx-jax from its wheel or source tree, or set {LIBRARY_ENV} to a "
        f"prebuilt {LIBRARY_NAME}."
    )


def gpu_arch() -> str | None:
    """nvcc's -arch for the first local device if it is a CUDA GPU (compute capability "9.0" -> "sm_90")."""
    capability = cuda_compute_capability()
    return None if capability is None else f"sm_{capability[0]}{capability[1]}"


def resolve_arch(arch: str | None = None) -> str:
    """`arch`, else `$LTX_JAX_CUDA_ARCH`, else the first GPU's, else sm_90; checked: `sm_XY`/`compute_XY`, XY >= 70.

    Raises `ValueError` naming the value, where it came from and the expected form.
    """
    from_env = os.environ.get(ARCH_ENV)
    detected = None if arch or from_env else gpu_arch()
    value = arch or from_env or detected or DEFAULT_ARCH
    match = re.fullmatch(r"(sm|compute)_(\d+)[af]?", value)
    if match is None or int(match.group(2)) < MIN_ARCH:
        source = "arch" if arch else ARCH_ENV if from_env else "the first GPU's architecture" if detected else "default"
        raise ValueError(
            f"{source}={value!r} is not a CUDA architecture this all-to-all supports; pass an nvcc -arch value "
            f"like 'sm_90' (H100/H200), 'sm_80' (A100) or 'sm_100' (B200), at least sm_{MIN_ARCH}."
        )
    return value


def source_hash() -> str:
    """A short hash of the CUDA sources, so that a build of other sources is never loaded."""
    digest = hashlib.sha256()
    for path in sorted(p for p in sources_dir().iterdir() if p.suffix in SOURCE_SUFFIXES):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:SOURCE_HASH_CHARS]


def library_dir(arch: str | None = None) -> Path:
    """The cache folder of the build for this jax, `arch` (see `resolve_arch`) and these sources."""
    return cache_dir() / "ffi" / f"jax-{jax.__version__}-{resolve_arch(arch)}-{source_hash()}"


def build_command(arch: str) -> str:
    """The shell command that builds the library where this process looks for it."""
    settings = [f"{ARCH_ENV}={arch}"]
    if os.environ.get(CACHE_ENV):
        settings.append(f"{CACHE_ENV}={os.environ[CACHE_ENV]}")
    return " ".join([*settings, BUILD_COMMAND])


def find_library() -> Path:
    """`$LTX_JAX_FFI_LIBRARY` if set, else the cached build for this jax, GPU architecture and sources.

    Raises `RuntimeError` naming the build command, the variable and `backend='all_to_all'` if it is missing.
    """
    prebuilt = os.environ.get(LIBRARY_ENV)
    if prebuilt:
        path = Path(prebuilt).expanduser().resolve()
        if not path.is_file():
            raise RuntimeError(
                f"{LIBRARY_ENV}={prebuilt!r} is not a file. Point it at a built {LIBRARY_NAME} (`{BUILD_COMMAND}` "
                "prints the path of the one it builds), unset it to use the build cache, or use backend='all_to_all'."
            )
        return path
    arch = resolve_arch()
    path = library_dir(arch) / LIBRARY_NAME
    if not path.is_file():
        raise RuntimeError(
            f"ltx-jax's CUDA all-to-all library is not built for jax {jax.__version__} and {arch} ({path} does not "
            f"exist). Build it with `{build_command(arch)}` (needs nvcc), set {LIBRARY_ENV} to a prebuilt "
            f"{LIBRARY_NAME}, or use backend='all_to_all'."
        )
    return path.resolve()
