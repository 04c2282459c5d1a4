"""Where parameters live on the mesh: replicated (what the strategies need), or sharded FSDP-style.

FSDP-style: each parameter is split over the sequence axes (`"sp"`, or `("ring", "ulysses")` of a
2-D mesh, i.e. over every device) along its largest axis that the device count divides (parameters
with no such axis stay replicated), and gathered back whole right before the block that uses it runs.

Loading: `make_array_from_reader` asks a reader once per process for the one box of the parameter
that this process's devices hold, so no process reads (or holds on the host) the other processes'
shards, and a replicated parameter is read once per process, not once per device.
"""

from collections.abc import Callable

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, Sharding
from jax.sharding import PartitionSpec as P

from ltx_jax.parallel.mesh import SP_AXIS, SequenceAxes, sequence_axes, sequence_size


def fsdp_spec(shape: tuple[int, ...], mesh_size: int, axis_name: SequenceAxes = SP_AXIS) -> P:
    """`P(..., axis_name, ...)` on the largest axis of `shape` divisible by `mesh_size`; `P()` if none."""
    divisible = [i for i, size in enumerate(shape) if size % mesh_size == 0 and size >= mesh_size]
    if mesh_size == 1 or not divisible:
        return P()
    axis = max(divisible, key=lambda i: shape[i])
    return P(*([None] * axis), axis_name)


def param_sharding(shape: tuple[int, ...], mesh: Mesh, shard_weights: bool) -> NamedSharding:
    """Replicated, or with `shard_weights` the FSDP split of `fsdp_spec` over the mesh's sequence axes."""
    if not shard_weights:
        return NamedSharding(mesh, P())
    return NamedSharding(mesh, fsdp_spec(shape, sequence_size(mesh), sequence_axes(mesh)))


def sharded_axis(spec: P, axis_name: SequenceAxes = SP_AXIS) -> int | None:
    return next((i for i, name in enumerate(spec) if name == axis_name), None)


def gather(x: jax.Array, spec: P, axis_name: SequenceAxes = SP_AXIS) -> jax.Array:
    """Inside `shard_map`: the whole parameter from this device's shard of it."""
    axis = sharded_axis(spec, axis_name)
    return x if axis is None else lax.all_gather(x, axis_name, axis=axis, tiled=True)


def spec_of(x: jax.Array, axis_name: SequenceAxes = SP_AXIS) -> P:
    """The PartitionSpec of a parameter placed by `param_sharding` (replicated for anything else)."""
    sharding = getattr(x, "sharding", None)
    return sharding.spec if isinstance(sharding, NamedSharding) and axis_name in tuple(sharding.spec) else P()


def local_box(shape: tuple[int, ...], sharding: Sharding) -> tuple[slice, ...]:
    """The smallest box of an array of `shape` holding every shard of this process's devices under
    `sharding` (their union when, as on `make_mesh`'s meshes, a process's devices are consecutive)."""
    boxes = [_explicit(index, shape) for index in sharding.addressable_devices_indices_map(shape).values()]
    if not boxes:
        raise ValueError(
            f"process {jax.process_index()} holds no device of this sharding ({sharding}); every process must "
            "own devices of the mesh it loads onto (make_mesh's meshes span all processes)."
        )
    return tuple(
        slice(min(b[axis].start for b in boxes), max(b[axis].stop for b in boxes)) for axis in range(len(shape))
    )


def make_array_from_reader(
    shape: tuple[int, ...], sharding: Sharding, read: Callable[[tuple[slice, ...]], np.ndarray]
) -> jax.Array:
    """A global array of `shape` placed by `sharding`, each process calling `read(box)` exactly once for
    its `local_box` (a step-1 slice per axis; the whole array when replicated) and cutting its
    devices' shards out of that block."""
    box = local_box(shape, sharding)
    block = read(box)
    expected = tuple(s.stop - s.start for s in box)
    if tuple(block.shape) != expected:
        raise ValueError(f"make_array_from_reader: read({box}) returned shape {block.shape}, expected {expected}.")

    def shard(index: tuple[slice, ...]) -> np.ndarray:
        within = zip(_explicit(index, shape), box, strict=True)
        return block[tuple(slice(s.start - b.start, s.stop - b.start) for s, b in within)]

    return jax.make_array_from_callback(shape, sharding, shard)


def _explicit(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """A device's index with explicit bounds (`slice(None)` -> `slice(0, n)`)."""
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(index, shape, strict=True))
