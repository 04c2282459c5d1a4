"""One process per GPU: naming and swapping the CUDA IPC handles of the all-to-all's buffers.

Each process allocates its own ranks' buffers and exports a CUDA IPC handle for each; the handles
travel through the jax.distributed key-value store. Communicators are made at trace time, and every
process traces the same programs in the same order, so a per-process serial number plus the axis,
the slot size and the group's devices give every process the same keys without talking first.
"""

from __future__ import annotations

import ctypes
import dataclasses
import socket
from collections.abc import Mapping, Sequence
from typing import Protocol

KEY_PREFIX = "ltx_jax/ffi/all_to_all"
MESSAGE_BYTES = 1024
DEFAULT_SETUP_TIMEOUT_S = 300.0  # covers one process tracing/compiling well behind another


@dataclasses.dataclass(frozen=True)
class Rank:
    """One rank of a group: the process that runs it, its JAX device id (the same in every process)
    and its CUDA ordinal, which only the owning process knows (-1 elsewhere: JAX gives no
    `local_hardware_id` for another process's devices; the owner publishes it with its handle)."""

    process: int
    device: int
    ordinal: int = -1


@dataclasses.dataclass(frozen=True)
class Record:
    """What a rank publishes: its buffer's IPC handle and what every peer must agree on or check."""

    handle: bytes
    nblocks: int
    slot_bytes: int
    ordinal: int
    host: str


class KeyValueStore(Protocol):
    """The part of jax.distributed's client used here."""

    def key_value_set(self, key: str, value: str) -> None: ...

    def blocking_key_value_get(self, key: str, timeout_in_ms: int) -> str: ...


def group_label(group: Sequence[Rank]) -> str:
    """`"p0.d0-p1.d1"`: the group's processes and JAX device ids, identical in every process."""
    return "-".join(f"p{r.process}.d{r.device}" for r in group)


def handle_key(serial: int, axis_name: str, slot_bytes: int, group: Sequence[Rank], rank: int) -> str:
    """The key under which rank `rank` of `group` publishes its handle for communicator `serial`."""
    return f"{KEY_PREFIX}/{serial}/{axis_name}/{slot_bytes}/{group_label(group)}/rank{rank}"


def encode(handle: bytes, nblocks: int, slot_bytes: int, ordinal: int, host: str | None = None) -> str:
    """A published value: the send-kernel grid and slot size (which every rank must share), the
    rank's CUDA ordinal and host name (to check the group), and the handle."""
    return f"{nblocks}:{slot_bytes}:{ordinal}:{host or socket.gethostname()}:{handle.hex()}"


def decode(value: str) -> Record:
    """`encode`'s inverse. Raises `ValueError` on a malformed value."""
    try:
        nblocks, slot_bytes, ordinal, host, handle = value.split(":")
        return Record(bytes.fromhex(handle), int(nblocks), int(slot_bytes), int(ordinal), host)
    except ValueError as error:
        raise ValueError(f"malformed all-to-all handle record {value[:80]!r}: {error}") from None


def check_group(group: Sequence[Rank], records: Sequence[Record], axis_name: str) -> None:
    """Raises `ValueError` if the group's ranks are on different hosts, or two processes name the
    same CUDA ordinal (processes restricted with CUDA_VISIBLE_DEVICES all see GPU 0, and CUDA IPC
    maps a peer's memory only if the peer's GPU is visible here too)."""
    hosts = {record.host for record in records}
    if len(hosts) > 1:
        raise ValueError(
            f"axis {axis_name!r}: backend='ffi' maps peers' memory with CUDA IPC, within one node, but this axis "
            f"spans hosts {sorted(hosts)}. Use backend='all_to_all', or a 2-D mesh whose ffi axis stays in a node."
        )
    seen: dict[int, Rank] = {}
    for rank, record in zip(group, records, strict=True):
        other = seen.setdefault(record.ordinal, rank)
        if other.process != rank.process:
            raise ValueError(
                f"axis {axis_name!r}: processes {other.process} and {rank.process} both run GPU {record.ordinal}. "
                "backend='ffi' with one process per GPU needs every process to see all GPUs of the node: start "
                "them with jax.distributed.initialize(local_device_ids=[i]) instead of CUDA_VISIBLE_DEVICES=i, "
                "or use backend='all_to_all'."
            )


def kv_client() -> KeyValueStore:
    """jax.distributed's key-value client. Raises `RuntimeError` if jax.distributed is not initialized."""
    from jax._src.distributed import global_state  # the only handle on the store jax exposes

    if global_state.client is None:
        raise RuntimeError(
            "backend='ffi' with several processes swaps its CUDA IPC handles through jax.distributed, which is "
            "not initialized in this process; call jax.distributed.initialize(...) first."
        )
    return global_state.client


def exchange_handles(
    store: KeyValueStore,
    keys: Mapping[tuple[int, int], str],
    owners: Mapping[tuple[int, int], Rank],
    mine: Mapping[tuple[int, int], str],
    timeout_s: float,
) -> dict[tuple[int, int], str]:
    """Publishes this process's values `mine` and returns every (group, rank)'s value.

    Raises `TimeoutError` naming the rank, its process and its GPU if a peer does not publish
    within `timeout_s` seconds.
    """
    for where, value in mine.items():
        store.key_value_set(keys[where], value)
    values = dict(mine)
    for where, key in keys.items():
        if where in values:
            continue
        owner = owners[where]
        try:
            values[where] = store.blocking_key_value_get(key, max(1, int(timeout_s * 1000)))
        except Exception as error:  # jax raises JaxRuntimeError(DEADLINE_EXCEEDED); keep its text
            raise TimeoutError(
                f"backend='ffi': process {owner.process} did not publish the CUDA IPC handle of rank {where[1]} "
                f"(JAX device {owner.device}) within {timeout_s:g} s (key {key!r}). Every process must trace the "
                f"same programs in the same order; process {owner.process} may have failed, be stuck, or run a "
                f"different program. ({error})"
            ) from error
    return values


def handle_table(
    values: Mapping[tuple[int, int], str], groups: Sequence[Sequence[Rank]], axis_name: str, handle_bytes: int
) -> tuple[bytes, list[int]]:
    """Every rank's handle, group by group, as one byte string for the C side, and every rank's CUDA
    ordinal in its own process (for messages).

    Raises `ValueError` if a handle is not `handle_bytes` long, if two ranks disagree on the
    send-kernel grid or slot size (GPUs of different models, or different `blocks=` in different
    processes), which would hang the barrier, or if a group is not on one node (`check_group`).
    """
    table, ordinals, first = [], [], None
    for gi, group in enumerate(groups):
        records = [decode(values[(gi, r)]) for r in range(len(group))]
        check_group(group, records, axis_name)
        for rank, record in zip(group, records, strict=True):
            if len(record.handle) != handle_bytes:
                raise ValueError(
                    f"backend='ffi': {rank} published a {len(record.handle)}-byte CUDA IPC handle, expected "
                    f"{handle_bytes}; the processes run different builds of the library."
                )
            here = (record.nblocks, record.slot_bytes, rank)
            first = first or here
            if here[:2] != first[:2]:
                raise ValueError(
                    f"backend='ffi': {first[2]} uses {first[0]} send blocks and {first[1]}-byte slots but {rank} "
                    f"uses {record.nblocks} and {record.slot_bytes}. Every rank must agree: use GPUs of one model, "
                    "or pass the same blocks= in every process."
                )
            table.append(record.handle)
            ordinals.append(record.ordinal)
    return b"".join(table), ordinals


def prepare(
    lib: ctypes.CDLL, groups: tuple[tuple[Rank, ...], ...], me: int, max_bytes: int, blocks: int, timeout_s: float
) -> tuple[int, dict[tuple[int, int], str]]:
    """Allocates process `me`'s ranks of `groups` (ltx_a2a_ipc_prepare).

    Returns the pending communicator's id and, per (group, rank) of `me`, the value to publish.
    Raises `RuntimeError` with the reason if the allocation fails (nothing stays allocated).
    """
    n = len(groups[0])
    ranks = [r for g in groups for r in g]
    ordinals = (ctypes.c_int * len(ranks))(*(r.ordinal for r in ranks))
    owned = (ctypes.c_int * len(ranks))(*(r.process == me for r in ranks))
    slot_bytes, nblocks = ctypes.c_ulonglong(max_bytes), ctypes.c_int(blocks)
    size = lib.ltx_a2a_handle_bytes()
    handles = ctypes.create_string_buffer(size * len(ranks))
    message = ctypes.create_string_buffer(MESSAGE_BYTES)
    pending = lib.ltx_a2a_ipc_prepare(
        len(groups), n, ordinals, owned, ctypes.byref(slot_bytes), ctypes.byref(nblocks), timeout_s, handles,
        message, MESSAGE_BYTES,
    )  # fmt: skip
    if pending < 0:
        raise RuntimeError(f"Could not allocate the all-to-all buffers for {groups}: {message.value.decode()}")
    return pending, {
        divmod(i, n): encode(handles.raw[i * size : (i + 1) * size], nblocks.value, slot_bytes.value, rank.ordinal)
        for i, rank in enumerate(ranks)
        if rank.process == me
    }
