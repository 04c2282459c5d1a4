"""Head-exchange backends: functions with `jax.lax.all_to_all`'s signature.

"all_to_all" is `jax.lax.all_to_all` (NCCL on GPU; works on CPU, TPU and across hosts). "ffi" is
the CUDA peer-to-peer kernel of `ltx_jax.ffi`, which only exists in CUDA builds.
"""

from collections.abc import Callable
from typing import Literal, get_args

import jax
from jax import lax
from jax.sharding import Mesh

ExchangeBackend = Literal["all_to_all", "ffi"]
AllToAll = Callable[..., jax.Array]  # (x, *, axis_name, split_axis, concat_axis, tiled) -> x


def lax_all_to_all(x: jax.Array, *, axis_name: str, split_axis: int, concat_axis: int, tiled: bool = True) -> jax.Array:
    return lax.all_to_all(x, axis_name, split_axis, concat_axis, tiled=tiled)


def exchange_backend(name: ExchangeBackend | AllToAll, mesh: Mesh | None = None) -> AllToAll:
    """The all-to-all named `name` for `mesh`. Raises with the reason if it cannot run here.

    "ffi" needs the mesh (its peer buffers live on the mesh's GPUs) and a built `ltx_jax.ffi` library.
    An all-to-all callable is returned as it is, e.g. `FfiAllToAll(mesh, command_buffer=True)`.
    """
    if callable(name):
        return name
    if name == "all_to_all":
        return lax_all_to_all
    if name == "ffi":
        if mesh is None:
            raise ValueError("backend='ffi' needs the mesh it exchanges over: exchange_backend('ffi', mesh).")
        from ltx_jax.ffi import FfiAllToAll  # the CUDA backend is imported only when asked for

        return FfiAllToAll(mesh)
    raise ValueError(f"backend must be one of {list(get_args(ExchangeBackend))}, got {name!r}.")


def send_heads(x: jax.Array, all_to_all: AllToAll, axis_name: str) -> jax.Array:
    """`(..., T_local, H, D)` -> `(..., T, H / n, D)`: this device's heads of every token."""
    return all_to_all(x, axis_name=axis_name, split_axis=x.ndim - 2, concat_axis=x.ndim - 3, tiled=True)


def gather_heads(x: jax.Array, all_to_all: AllToAll, axis_name: str) -> jax.Array:
    """`(..., T, H / n, D)` -> `(..., T_local, H, D)`: every head of this device's tokens."""
    return all_to_all(x, axis_name=axis_name, split_axis=x.ndim - 3, concat_axis=x.ndim - 2, tiled=True)
