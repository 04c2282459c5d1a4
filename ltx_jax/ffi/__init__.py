"""CUDA peer-to-peer all-to-all registered through the XLA FFI (`SequenceParallel(backend="ffi")`).

Build the library first: `python -m ltx_jax.ffi.build` (needs nvcc; the sources ship in the package)
writes it to a per-user cache folder for this jax and GPU architecture (`ltx_jax.ffi.paths`), or
set `LTX_JAX_FFI_LIBRARY` to a prebuilt copy. Importing this package never loads it;
`FfiAllToAll` and `Communicator.create` do, and raise with the fix if it is missing.
"""

from ltx_jax.ffi.all2all import (
    DEFAULT_TIMEOUT_S,
    AllToAllError,
    Communicator,
    FfiAllToAll,
    all_to_all_ranked,
    check_errors,
    load_library,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AllToAllError",
    "Communicator",
    "FfiAllToAll",
    "all_to_all_ranked",
    "check_errors",
    "load_library",
]
