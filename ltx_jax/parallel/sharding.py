"""Where parameters live on the mesh: replicated (what the strategies need), or sharded FSDP-style.

FSDP-style: each parameter is split over the sequence axes (`"sp"`, or `("ring", "ulysses")` of a
2-D mesh, i.e. over every device) along its largest axis that the device count divides (parameters
with no such axis stay replicated), and gathered back whole right before the block that uses it runs
(`GatheredBlock`). Reading a checkpoint onto such a sharding: `ltx_jax.convert.placement`.
"""

from collections.abc import Mapping

import jax
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
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


def gather_state(state: nnx.State, specs: Mapping[tuple, P], axis_name: SequenceAxes = SP_AXIS) -> nnx.State:
    """Inside `shard_map`: `state` with each parameter that `specs` (path -> spec) shards gathered
    whole, in new Variables (`state` is left as it is)."""

    def whole(path: tuple, variable: nnx.Variable) -> nnx.Variable:
        spec = specs.get(path, P())
        if sharded_axis(spec, axis_name) is None:
            return variable
        return variable.replace(gather(variable.get_value(), spec, axis_name))

    return nnx.map_state(whole, state)


class GatheredBlock(nnx.Module):
    """A transformer block held as this device's FSDP shards and gathered whole right when it runs,
    so that one block's full weights are live at a time (torch FSDP's per-block wrapping).
    `SequenceParallel` wraps the blocks of its own copy of a sharded model; runs inside `shard_map`.

    Args:
        block: the block, its parameters sharded over `axis_name`.
        specs: each sharded parameter's spec, by its path inside the block.
        axis_name: the mesh axes the parameters are sharded over.
    """

    def __init__(self, block: nnx.Module, specs: Mapping[tuple, P], axis_name: SequenceAxes) -> None:
        self.block = block
        self.specs = tuple(specs.items())  # static (hashable) metadata of the module graph
        self.axis_name = axis_name

    def __call__(self, *args: object) -> tuple:
        graphdef, shards = nnx.split(self.block)
        return nnx.merge(graphdef, gather_state(shards, dict(self.specs), self.axis_name))(*args)


def spec_of(x: jax.Array, axis_name: SequenceAxes = SP_AXIS) -> P:
    """The PartitionSpec of a parameter placed by `param_sharding` (replicated for anything else)."""
    sharding = getattr(x, "sharding", None)
    return sharding.spec if isinstance(sharding, NamedSharding) and axis_name in tuple(sharding.spec) else P()
