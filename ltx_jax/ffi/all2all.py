"""`jax.lax.all_to_all` by CUDA peer-to-peer copies, as an XLA FFI custom call.

Source: LTX-2's `ltx-kernels` all2all (`kern/csrc/all2all`), reworked for XLA: XLA owns the
outputs, so senders write into persistent per-GPU receive slots (two, used alternately) and each
rank copies its slot into the output; the slot parity and the arrival counters live in device
memory, so no host state changes between calls. Protocol and hazards: `csrc/all2all.cu`,
docs/ffi.md.

Two modes, the same kernels: one process drives all GPUs of the mesh (peer access between them),
or one process per GPU under `jax.distributed` (each allocates its own ranks' buffers and maps its
peers' through CUDA IPC handles swapped in the key-value store; `ltx_jax.ffi.ipc`). A barrier
that waits longer than `timeout_s` records which rank waited for which peer; that exchange's output
becomes NaN bytes and the next exchange on the communicator (or `check_errors()`) raises naming
both. The other ranks of the group, in every process, stop too and report that a peer failed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import itertools
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh

from ltx_jax.ffi import ipc
from ltx_jax.ffi.paths import find_library

DEFAULT_TIMEOUT_S = 10.0
# With one process per GPU the first exchange of a program also waits for processes still compiling
# or loading it, which takes far longer than any exchange.
MULTIPROCESS_TIMEOUT_S = 120.0
MAX_RANKS = 8
MIN_SLOT_BYTES = 1 << 20
TARGET = "ltx_all_to_all"  # host-side failure check on every call
GRAPH_TARGET = "ltx_all_to_all_graph"  # CUDA-graph capturable; failures show via check_errors()
_MESSAGE_BYTES = 1024
_communicators: list[Communicator] = []
_ipc_serial = itertools.count()  # every process makes the same communicators in the same order
_registered_from: Path | None = None  # XLA keeps a target's first registration for the process


class AllToAllError(RuntimeError):
    """A peer-to-peer exchange failed (a barrier timed out or a rank operand was wrong)."""


@functools.cache
def load_library() -> ctypes.CDLL:
    """Loads the CUDA library and registers its FFI targets with JAX (once).

    The library is `$LTX_JAX_FFI_LIBRARY`, else the cached build for this jax and GPU (`paths.find_library`).
    Raises `RuntimeError` naming the build command (`python -m ltx_jax.ffi.build`) if it is missing.
    """
    path = find_library()
    if _registered_from is not None and _registered_from != path:
        raise RuntimeError(
            f"The all-to-all FFI targets are already registered from {_registered_from}; XLA cannot register {path} "
            "in the same process. Restart Python to load another build."
        )
    lib = ctypes.CDLL(str(path))
    lib.ltx_a2a_create.restype = ctypes.c_int
    lib.ltx_a2a_create.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_ulonglong,
        ctypes.c_int,
        ctypes.c_double,
        ctypes.c_char_p,
        ctypes.c_int,
    ]
    lib.ltx_a2a_error.restype = ctypes.c_int
    lib.ltx_a2a_error.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.ltx_a2a_handle_bytes.restype = ctypes.c_int
    lib.ltx_a2a_handle_bytes.argtypes = []
    int_p, size_p = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulonglong)
    lib.ltx_a2a_ipc_prepare.restype = ctypes.c_int
    lib.ltx_a2a_ipc_prepare.argtypes = [ctypes.c_int, ctypes.c_int, int_p, int_p, size_p, int_p, ctypes.c_double]
    lib.ltx_a2a_ipc_prepare.argtypes += [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.ltx_a2a_ipc_open.restype = ctypes.c_int
    lib.ltx_a2a_ipc_open.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_char_p,
        ctypes.c_int,
    ]
    lib.ltx_a2a_ipc_abort.restype = None
    lib.ltx_a2a_ipc_abort.argtypes = [ctypes.c_int, ctypes.c_int]
    if _registered_from is None:
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.LtxAllToAll), platform="CUDA")
        jax.ffi.register_ffi_target(GRAPH_TARGET, jax.ffi.pycapsule(lib.LtxAllToAllGraph), platform="CUDA")
        _set_registered(path)
    return lib


def _set_registered(path: Path) -> None:
    global _registered_from
    _registered_from = path


def check_communicator_args(groups: Sequence[Sequence[int]], timeout_s: float) -> tuple[tuple[int, ...], ...]:
    """`groups` as tuples of ints. Raises `ValueError` on unequal or empty groups or a bad timeout."""
    groups = tuple(tuple(int(d) for d in g) for g in groups)
    n = len(groups[0]) if groups else 0
    if not groups or not 1 <= n <= MAX_RANKS or any(len(g) != n for g in groups):
        raise ValueError(f"groups must be equal-sized groups of 1 to {MAX_RANKS} ranks, got {groups}.")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}.")
    return groups


@dataclasses.dataclass(frozen=True)
class Communicator:
    """Receive slots and counters for groups of ranks; lives as long as the process.

    Attributes:
        id: the handle the FFI call carries.
        groups: per group, the CUDA ordinal of each rank in the process that runs it (in one
            process, a repeated ordinal is a virtual rank).
        max_bytes: the largest per-rank output one exchange may have.
        timeout_s: how long a rank waits for a peer before failing.
        owners: per group, the process of each rank (one process per GPU), or None (one process).
    """

    id: int
    groups: tuple[tuple[int, ...], ...]
    max_bytes: int
    timeout_s: float
    owners: tuple[tuple[int, ...], ...] | None = None

    @property
    def n(self) -> int:
        return len(self.groups[0])

    @classmethod
    def create(
        cls, groups: Sequence[Sequence[int]], max_bytes: int, *, timeout_s: float = DEFAULT_TIMEOUT_S, blocks: int = 0
    ) -> Communicator:
        """Allocates two `max_bytes` slots per rank on its GPU and enables peer access in each group.

        `blocks` is the send kernel's grid (0: one block per SM, as upstream).
        """
        groups = check_communicator_args(groups, timeout_s)
        lib = load_library()
        ordinals = (ctypes.c_int * (len(groups) * len(groups[0])))(*(d for g in groups for d in g))
        message = ctypes.create_string_buffer(_MESSAGE_BYTES)
        comm_id = lib.ltx_a2a_create(
            len(groups), len(groups[0]), ordinals, max_bytes, blocks, timeout_s, message, _MESSAGE_BYTES
        )
        if comm_id < 0:
            raise RuntimeError(
                f"Could not create the all-to-all communicator for GPUs {groups}: {message.value.decode()}"
            )
        comm = cls(comm_id, groups, int(max_bytes), float(timeout_s))
        _communicators.append(comm)
        return comm

    @classmethod
    def create_ipc(
        cls,
        groups: Sequence[Sequence[ipc.Rank]],
        max_bytes: int,
        *,
        axis_name: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        blocks: int = 0,
        setup_timeout_s: float = ipc.DEFAULT_SETUP_TIMEOUT_S,
    ) -> Communicator:
        """One process per GPU: allocates this process's ranks of `groups` (the groups it takes part
        in), swaps CUDA IPC handles with the other processes through jax.distributed and maps theirs.

        Every process must call this with the same arguments, in the same order. Raises
        `TimeoutError` naming the process that did not publish within `setup_timeout_s`.
        """
        me = jax.process_index()
        mine = tuple(tuple(g) for g in groups if any(r.process == me for r in g))
        if not mine:
            raise ValueError(f"axis {axis_name!r}: process {me} runs no rank of the groups {groups}.")
        check_communicator_args([[r.ordinal for r in g] for g in mine], timeout_s)
        serial = next(_ipc_serial)
        lib, store = load_library(), ipc.kv_client()
        keys = {
            (gi, r): ipc.handle_key(serial, axis_name, max_bytes, group, r)
            for gi, group in enumerate(mine)
            for r in range(len(group))
        }
        owners = {(gi, r): rank for gi, group in enumerate(mine) for r, rank in enumerate(group)}
        pending, records = ipc.prepare(lib, mine, me, max_bytes, blocks, timeout_s)
        try:
            values = ipc.exchange_handles(store, keys, owners, records, setup_timeout_s)
            table, rank_ordinals = ipc.handle_table(values, mine, axis_name, lib.ltx_a2a_handle_bytes())
        except BaseException:
            # The handles are published: peers may have mapped these buffers, so they are retired
            # (kept, and every reachable rank marked dead), not freed.
            lib.ltx_a2a_ipc_abort(pending, 1)
            raise
        message = ctypes.create_string_buffer(_MESSAGE_BYTES)
        all_ordinals = (ctypes.c_int * len(rank_ordinals))(*rank_ordinals)
        comm_id = lib.ltx_a2a_ipc_open(pending, table, all_ordinals, message, _MESSAGE_BYTES)
        if comm_id < 0:
            raise RuntimeError(f"Could not map the all-to-all buffers of {mine}: {message.value.decode()}")
        processes = tuple(tuple(r.process for r in g) for g in mine)
        n = len(mine[0])  # every rank's GPU as its own process published it (others' are -1 in `mine`)
        ordinals = tuple(tuple(rank_ordinals[g * n : (g + 1) * n]) for g in range(len(mine)))
        comm = cls(comm_id, ordinals, int(max_bytes), float(timeout_s), processes)
        _communicators.append(comm)
        return comm

    def error(self) -> str | None:
        """The recorded failure, or None while the communicator is healthy. Never waits on the GPU."""
        message = ctypes.create_string_buffer(_MESSAGE_BYTES)
        return message.value.decode() if load_library().ltx_a2a_error(self.id, message, _MESSAGE_BYTES) else None


def check_errors() -> None:
    """Raises `AllToAllError` naming the rank and the missing peer if any exchange has failed.

    Call after `block_until_ready()`: a failure inside the last exchange of a program is otherwise
    only seen by the next exchange (and as NaN outputs).
    """
    errors = [message for comm in _communicators if (message := comm.error())]
    if errors:
        raise AllToAllError("\n".join(errors))


def output_shape(shape: Sequence[int], n: int, split_axis: int, concat_axis: int) -> tuple[int, ...]:
    """`lax.all_to_all(tiled=True)`'s output shape over `n` ranks."""
    out = list(shape)
    out[split_axis] //= n
    out[concat_axis] *= n
    return tuple(out)


def all_to_all_ranked(
    x: jax.Array,
    rank: jax.Array,
    comm: Communicator,
    *,
    split_axis: int,
    concat_axis: int,
    command_buffer: bool = False,
) -> jax.Array:
    """One rank's part of a tiled all-to-all over `comm`'s group: x `(..)` -> `output_shape(..)`.

    `rank` is this device's rank as an int32 scalar on the device (`lax.axis_index` in a
    shard_map). Every rank of the group must make the same sequence of calls on `comm`.
    """
    split_axis, concat_axis = split_axis % x.ndim, concat_axis % x.ndim
    if x.shape[split_axis] % comm.n:
        raise ValueError(f"all_to_all: split axis {split_axis} of x{x.shape} must be divisible by the {comm.n} ranks.")
    if split_axis == concat_axis:
        raise ValueError(f"all_to_all: split_axis and concat_axis must differ, both are {split_axis}.")
    if x.dtype.itemsize not in (1, 2, 4, 8) or jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f"all_to_all: dtype {x.dtype} is not supported; use a 1, 2, 4 or 8 byte real dtype.")
    out = jax.ShapeDtypeStruct(output_shape(x.shape, comm.n, split_axis, concat_axis), x.dtype)
    call = jax.ffi.ffi_call(GRAPH_TARGET if command_buffer else TARGET, out, has_side_effect=True)
    return call(
        x,
        jnp.asarray(rank, jnp.int32).reshape(()),
        comm=np.int64(comm.id),
        n=np.int64(comm.n),
        split_axis=np.int64(split_axis),
        concat_axis=np.int64(concat_axis),
    )


def slot_size(nbytes: int) -> int:
    """A communicator's slot size for an exchange of `nbytes` per rank: a power of two, at least 1 MiB."""
    return max(MIN_SLOT_BYTES, 1 << (max(nbytes, 1) - 1).bit_length())


class FfiAllToAll:
    """`jax.lax.all_to_all` (tiled) over `mesh` by CUDA peer-to-peer copies; call it inside a
    `shard_map` over `mesh`. Communicators are created at trace time, one per mesh axis, sized to
    the largest exchange traced so far (rounded up to a power of two).

    With several processes (`jax.distributed`, one or more GPUs each, one node) each process runs
    only its own ranks and maps its peers' buffers through CUDA IPC; every process must trace the
    same programs in the same order (as SPMD programs do).

    Args:
        mesh: a mesh of CUDA GPUs of one node.
        timeout_s: how long a rank waits for a peer before the exchange fails. With several
            processes it must also cover how far one process may start a program behind another.
            None: DEFAULT_TIMEOUT_S (10 s) in one process, MULTIPROCESS_TIMEOUT_S (120 s) with several.
        command_buffer: mark the custom call CUDA-graph compatible (see GRAPH_TARGET).
        blocks: the send kernel's grid; 0 is one block per SM.
        setup_timeout_s: several processes: how long creating a communicator waits for the other
            processes' IPC handles.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        timeout_s: float | None = None,
        command_buffer: bool = False,
        blocks: int = 0,
        setup_timeout_s: float = ipc.DEFAULT_SETUP_TIMEOUT_S,
    ) -> None:
        if timeout_s is None:
            timeout_s = DEFAULT_TIMEOUT_S if jax.process_count() == 1 else MULTIPROCESS_TIMEOUT_S
        for name, value in (("timeout_s", timeout_s), ("setup_timeout_s", setup_timeout_s)):
            if not value > 0:
                raise ValueError(f"FfiAllToAll: {name} must be a positive number of seconds, got {value!r}.")
        if not isinstance(blocks, int) or blocks < 0:
            raise ValueError(f"FfiAllToAll: blocks must be an int >= 0 (0: one per SM), got {blocks!r}.")
        platforms = {d.platform for d in mesh.devices.flat}
        versions = {getattr(d.client, "platform_version", "").lower() for d in mesh.devices.flat}
        if platforms != {"gpu"} or not all("cuda" in v for v in versions):
            raise ValueError(
                f"backend='ffi' runs on CUDA GPUs; this mesh's devices are {sorted(platforms)}. "
                "Use backend='all_to_all'."
            )
        load_library()
        self.mesh, self.timeout_s, self.command_buffer, self.blocks = mesh, timeout_s, command_buffer, blocks
        self.setup_timeout_s = setup_timeout_s
        self._comms: dict[str, Communicator] = {}

    def __repr__(self) -> str:
        return (
            f"FfiAllToAll(mesh={dict(self.mesh.shape)}, timeout_s={self.timeout_s}, "
            f"command_buffer={self.command_buffer}, blocks={self.blocks})"
        )

    def ranks(self, axis_name: str) -> tuple[tuple[ipc.Rank, ...], ...]:
        """The devices along `axis_name` as `ipc.Rank`s, one tuple per index of the other axes."""
        if axis_name not in self.mesh.axis_names:
            raise ValueError(f"axis_name {axis_name!r} is not an axis of the mesh {self.mesh.axis_names}.")
        devices = np.moveaxis(self.mesh.devices, self.mesh.axis_names.index(axis_name), -1)
        rows = devices.reshape(-1, devices.shape[-1])
        me = jax.process_index()
        return tuple(
            tuple(ipc.Rank(d.process_index, d.id, d.local_hardware_id if d.process_index == me else -1) for d in row)
            for row in rows
        )

    def groups(self, axis_name: str) -> tuple[tuple[int, ...], ...]:
        """CUDA ordinals of the devices along `axis_name`, one tuple per index of the other axes."""
        return tuple(tuple(r.ordinal for r in row) for row in self.ranks(axis_name))

    def communicator(self, axis_name: str, nbytes: int) -> Communicator:
        """The communicator for `axis_name` with room for `nbytes` per rank, made or grown here."""
        comm = self._comms.get(axis_name)
        if comm is None or comm.max_bytes < nbytes:
            size = slot_size(nbytes)
            if jax.process_count() == 1:
                comm = Communicator.create(self.groups(axis_name), size, timeout_s=self.timeout_s, blocks=self.blocks)
            else:
                comm = Communicator.create_ipc(
                    self.ranks(axis_name),
                    size,
                    axis_name=axis_name,
                    timeout_s=self.timeout_s,
                    blocks=self.blocks,
                    setup_timeout_s=self.setup_timeout_s,
                )
            self._comms[axis_name] = comm
        return comm

    def __call__(
        self, x: jax.Array, *, axis_name: str, split_axis: int, concat_axis: int, tiled: bool = True
    ) -> jax.Array:
        if not tiled:
            raise ValueError("backend='ffi' implements all_to_all(tiled=True) only, got tiled=False.")
        if not isinstance(axis_name, str):
            raise ValueError(f"backend='ffi' exchanges over one mesh axis, got axis_name={axis_name!r}.")
        comm = self.communicator(axis_name, x.size * x.dtype.itemsize)
        if comm.n != lax.axis_size(axis_name):
            raise ValueError(f"axis {axis_name!r} has {lax.axis_size(axis_name)} devices here, the mesh {comm.n}.")
        return all_to_all_ranked(
            x,
            lax.axis_index(axis_name),
            comm,
            split_axis=split_axis,
            concat_axis=concat_axis,
            command_buffer=self.command_buffer,
        )
