"""Quantizing each parameter as a load places it, so a quantized model never sits on the devices in bf16.

fp8-cast casts each targeted weight as it lands. fp8 quantizes each targeted kernel as it lands, with the
scale `quantize_per_tensor` would give it: max |w| / 448, the maximum taken shard by shard on the devices
that hold them (no collective: loads place several tensors at once from threads, and collectives launched
from threads may meet in a different order on each device) and combined on the host. At most the
loader's in-flight tensors are in bf16 at once, rather than the whole model before `quantize_fp8` ran.

A kernel that a checkpoint stores in float8_e4m3fn with a per-tensor scale is placed as stored, with that
scale (`place_stored`), not dequantized and quantized again; a static input scale stored beside a kernel is
kept for its linear (`keep_input_scale`), stored or re-quantized.
Two exceptions hold bf16 longer: a kernel some of whose shards belong to other processes (weights sharded
over a multi-process mesh) is left in bf16 here and quantized by `quantize_fp8` once the model is whole,
on the main thread, in the same order in every process; and a converted directory of the first format
(one Orbax checkpoint) is restored whole first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, Sharding
from jax.sharding import PartitionSpec as P

from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.quantization import (
    FP8,
    Quantization,
    fp8_targets,
    is_fp8_cast_key,
    quantize_fp8,
    quantize_fp8_cast,
    scale_of_amax,
    to_fp8,
)

Path = tuple[Any, ...]
KeyTable = Mapping[str, tuple[Path, bool, tuple[int, ...], np.dtype]]  # an `expected_keys` table

_shard_amax = jax.jit(lambda x: jnp.max(jnp.abs(x.astype(jnp.float32))))
_scale_of_amax = jax.jit(scale_of_amax)
_to_fp8 = jax.jit(to_fp8)


def replicated_like(array: jax.Array) -> Sharding:
    """A sharding that replicates a scalar over the devices holding `array`."""
    sharding = array.sharding
    return NamedSharding(sharding.mesh, P()) if isinstance(sharding, NamedSharding) else sharding


def placed_scale(scale: float, like: jax.Array) -> jax.Array:
    """The float32 `scale` replicated over the devices holding `like`, each process supplying its own copy
    (every process computes the same value): `jax.device_put` onto devices of other processes would
    check that with a collective, from the loader's threads."""
    value = np.asarray(scale, np.float32).reshape(())
    return jax.make_array_from_callback((), replicated_like(like), lambda _: value)


def quantize_placed(kernel: jax.Array) -> tuple[jax.Array, jax.Array] | None:
    """`quantize_per_tensor(kernel)`, bit for bit, computed without a collective; None when this process's
    devices do not hold the whole of `kernel` (it is split over several processes)."""
    if not (kernel.is_fully_addressable or kernel.sharding.is_fully_replicated):
        return None
    shards = kernel.addressable_shards
    # one of each distinct shard; a kernel replicated over several processes may hold no replica 0 here
    distinct = [shard for shard in shards if shard.replica_id == 0] or shards[:1]
    maxima = [_shard_amax(shard.data) for shard in distinct]
    amax = np.max(np.array([np.asarray(m) for m in maxima], np.float32))  # exact; a NaN propagates, as jnp.max's
    scale = placed_scale(np.asarray(_scale_of_amax(amax)), kernel)
    return _to_fp8(kernel, scale), scale


@dataclasses.dataclass
class QuantizeOnLoad:
    """What a load does to each parameter as it is placed, for `quantization`, and to the model after.

    Call it on each placed parameter (`quantize(path, value)`), from any thread; then `finish(model)`
    on the model holding the values it returned."""

    quantization: Quantization
    cast_keys: tuple[tuple[str, Path], ...]  # fp8-cast: (checkpoint key, parameter path) of each targeted one
    fp8_kernels: frozenset[Path]  # fp8: the kernels `quantize_fp8` replaces
    scales: dict[Path, jax.Array] = dataclasses.field(default_factory=dict)
    input_scales: dict[Path, jax.Array] = dataclasses.field(default_factory=dict)  # an fp8 checkpoint's
    cast_paths: frozenset[Path] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.cast_paths = frozenset(path for _, path in self.cast_keys)

    @classmethod
    def plan(cls, model: nnx.Module, quantization: Quantization, table: KeyTable | None = None) -> QuantizeOnLoad:
        """The plan for `model` (abstract is enough: only paths and keys are read); `table` is its
        `expected_keys`, where the caller has it."""
        cast_keys = ()
        if quantization == "fp8-cast":
            table = expected_keys(model) if table is None else table
            cast_keys = tuple((key, entry[0]) for key, entry in table.items() if is_fp8_cast_key(key))
        kernels = frozenset(target[0] for target in fp8_targets(model)) if quantization == "fp8" else frozenset()
        return cls(quantization, cast_keys, kernels)

    def __call__(self, path: Path, value: jax.Array) -> jax.Array:
        """The placed parameter at `path` as the quantized model keeps it."""
        if path in self.cast_paths:
            return value.astype(FP8)
        if path in self.fp8_kernels:
            quantized = quantize_placed(value)
            if quantized is not None:
                value, self.scales[path] = quantized
        return value

    def place_stored(self, path: Path, values: jax.Array, scale: np.ndarray) -> jax.Array:
        """A kernel placed in its stored float8_e4m3fn, kept with its stored scale."""
        self.scales[path] = placed_scale(scale, values)
        return values

    def keep_input_scale(self, path: Path, input_scale: np.ndarray, kernel: jax.Array) -> None:
        """The static input scale a checkpoint stores beside the fp8 kernel at `path`, for its linear."""
        self.input_scales[path] = placed_scale(input_scale, kernel)

    def finish(self, model: nnx.Module, compute_dtype: jnp.dtype) -> nnx.Module:
        """`model`, holding the values this returned, with its linears turned fp8 (in place)."""
        if self.quantization == "fp8-cast":
            return quantize_fp8_cast(model, self.cast_keys, compute_dtype)
        if self.quantization == "fp8":
            return quantize_fp8(model, self.scales, input_scales=self.input_scales)
        return model
