"""The sequence-parallel forward as one compiled program per distinct block, not one with 48 blocks unrolled.

XLA's compile time grows with the program: the 48-block LTX-2.3 forward traced unrolled took 36-53 s
to compile per input shape on an H200, and a two-stage run has two shapes. The blocks are one
computation on different weights, so `BlockPrograms` runs the forward as

    prepare (patchify, AdaLN, RoPE) -> block, once per transformer block -> finish (output, gather)

three kinds of jitted `shard_map`, where every block with the same module structure and the same
kinds of skipped attention (`MaskedSkips`) calls one compiled program. Which samples skip an
attention is an input (`BatchedPerturbationConfig.masked_at_blocks`), so STG's perturbed block runs
the others' program: a second one took 3.8 s of a cold run's stage 1 on an H200. Python dispatches
them in turn, through `launch` (which keeps the queue of unfinished programs short: see
`ltx_jax.parallel.launch`), and the device runs them back to back (dispatch is asynchronous and costs
microseconds against milliseconds of work per block).

Between the programs each device's values stay where they are: they travel as arrays with a leading
axis of one entry per device, sharded over the sequence axes (`to_carry`), so any pytree passes
without a spec per field and nothing moves between devices. Only the residual streams change from
block to block, and only they are donated.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig, MaskedSkips
from ltx_jax.model.attention import AttentionOps
from ltx_jax.model.model import DIT_COMPILER_OPTIONS
from ltx_jax.model.transformer_args import TransformerArgs
from ltx_jax.parallel.launch import launched
from ltx_jax.parallel.mesh import SequenceAxes

KEPT_MASK_PLANS = 8  # perturbation configs whose keep-masks stay on the devices (a guided run uses one or two)
Streams = tuple[TransformerArgs | None, TransformerArgs | None]  # (video, audio) block inputs
# prepare(outer state, video, audio) -> streams, inside the shard_map
PrepareFn = Callable[[nnx.State, object, object], Streams]
# finish(outer state, streams) -> (video velocity, audio velocity), inside the shard_map
FinishFn = Callable[[nnx.State, Streams], tuple[jax.Array | None, jax.Array | None]]


def to_carry(tree: object) -> object:
    """Inside `shard_map`: this device's values with a leading axis of 1 (sharded `P(axes)` outside)."""
    return jax.tree.map(lambda x: x[None], tree)


def from_carry(tree: object) -> object:
    """Inside `shard_map`: the values `to_carry` stored, without their leading axis."""
    return jax.tree.map(lambda x: x[0], tree)


def split_streams(streams: Streams) -> tuple[tuple, tuple]:
    """`((video x, audio x), (video rest, audio rest))`: the residual streams, and what stays fixed."""
    xs = tuple(None if s is None else s.x for s in streams)
    rest = tuple(None if s is None else dataclasses.replace(s, x=None) for s in streams)
    return xs, rest


def join_streams(xs: tuple, rest: tuple) -> Streams:
    return tuple(None if r is None else dataclasses.replace(r, x=x) for x, r in zip(xs, rest, strict=True))


@dataclasses.dataclass(frozen=True)
class Block:
    """A part of the model as the programs see it (a transformer block, or what is outside them): its
    module structure, parameters and their PartitionSpecs."""

    graphdef: nnx.GraphDef
    state: nnx.State
    specs: object  # the PartitionSpec tree of `state`


class BlockPrograms:
    """A DiT forward on `mesh` as prepare -> blocks -> finish programs, for one token layout.

    Args:
        mesh, axes: the mesh and its sequence axes.
        outer_state, outer_specs: the parameters outside the blocks and their PartitionSpecs.
        blocks: the transformer blocks in order.
        attention_ops: the attention functions inside the shard_map (they know the token counts).
        prepare, prepare_in_specs: builds the block inputs from `(outer_state, video, audio)`
            (arguments as the caller passes them to `__call__`), and the in_specs of those inputs.
        finish, finish_out_specs: the velocities from the last block's outputs, and their out_specs.
    """

    def __init__(
        self,
        mesh: Mesh,
        axes: SequenceAxes,
        *,
        outer_state: nnx.State,
        outer_specs: object,
        blocks: Sequence[Block],
        attention_ops: AttentionOps,
        prepare: PrepareFn,
        prepare_in_specs: tuple,
        finish: FinishFn,
        finish_out_specs: tuple,
    ) -> None:
        self._outer_state, self._blocks, self._attention_ops = outer_state, tuple(blocks), attention_ops
        self._replicated = NamedSharding(mesh, P())
        self._masks: dict[BatchedPerturbationConfig, tuple] = {}  # the keep-masks on the devices, per config
        carry = P(axes)
        shard_map = functools.partial(jax.shard_map, mesh=mesh, check_vma=False)
        jit = functools.partial(jax.jit, compiler_options=DIT_COMPILER_OPTIONS)

        def prepare_local(state: nnx.State, *inputs: object) -> tuple:
            return to_carry(split_streams(prepare(state, *inputs)))

        def finish_local(state: nnx.State, xs: tuple, rest: tuple) -> tuple:
            return finish(state, join_streams(from_carry(xs), from_carry(rest)))

        self._prepare = launched(
            jit(shard_map(prepare_local, in_specs=(outer_specs, *prepare_in_specs), out_specs=carry))
        )
        self._finish = launched(
            jit(shard_map(finish_local, in_specs=(outer_specs, carry, carry), out_specs=finish_out_specs))
        )
        self._block_programs: dict[nnx.GraphDef, Callable] = {}
        self._compiling = threading.Lock()
        for block in self._blocks:
            if block.graphdef not in self._block_programs:
                self._block_programs[block.graphdef] = self._block_program(block, shard_map, carry)

    def _block_program(self, block: Block, shard_map: Callable, carry: P) -> Callable:
        """One jitted program for every block with `block`'s structure and the same `MaskedSkips`
        (static); the keep-masks `(len(skips.masked), B)` are an input, the same on every device."""
        graphdef, attention_ops = block.graphdef, self._attention_ops

        def run(state: nnx.State, xs: tuple, rest: tuple, masks: jax.Array, *, skips: MaskedSkips) -> tuple:
            def local(state: nnx.State, xs: tuple, rest: tuple, masks: jax.Array) -> tuple:
                video, audio = join_streams(from_carry(xs), from_carry(rest))
                block_module = nnx.merge(graphdef, state)
                video, audio = block_module(video, audio, skips.with_masks(masks), attention_ops)
                return to_carry(split_streams((video, audio))[0])

            in_specs = (block.specs, carry, carry, P())
            return shard_map(local, in_specs=in_specs, out_specs=carry)(state, xs, rest, masks)

        return launched(
            jax.jit(run, static_argnames=("skips",), donate_argnums=(1,), compiler_options=DIT_COMPILER_OPTIONS)
        )

    def _skip_plan(self, perturbations: BatchedPerturbationConfig) -> tuple[tuple[MaskedSkips, jax.Array], ...]:
        """`perturbations.masked_at_blocks` with the masks on the devices, placed once per config (a
        denoising loop passes the same config every step) and once per distinct mask; the
        `KEPT_MASK_PLANS` configs used last are kept."""
        if perturbations in self._masks:
            self._masks[perturbations] = self._masks.pop(perturbations)  # the most recently used last
            return self._masks[perturbations]
        placed: dict[tuple, jax.Array] = {}
        plan = []
        for skips, masks in perturbations.masked_at_blocks(len(self._blocks)):
            key = (masks.shape, masks.tobytes())
            if key not in placed:
                # built per process, shard by shard (as SequenceParallel places host inputs): device_put
                # would compare the value across processes first
                placed[key] = jax.make_array_from_callback(masks.shape, self._replicated, lambda i, m=masks: m[i])
            plan.append((skips, placed[key]))
        if len(self._masks) == KEPT_MASK_PLANS:  # a caller varying its perturbations keeps a few, not all
            del self._masks[next(iter(self._masks))]
        self._masks[perturbations] = tuple(plan)
        return self._masks[perturbations]

    def __call__(
        self, *inputs: object, perturbations: BatchedPerturbationConfig
    ) -> tuple[jax.Array | None, jax.Array | None]:
        """The forward: `inputs` are what `prepare` takes after the outer state."""
        with self._compiling:  # a `compile_ahead` on another thread finishes first
            plan = self._skip_plan(perturbations)
            xs, rest = self._prepare(self._outer_state, *inputs)
            for block, (skips, masks) in zip(self._blocks, plan, strict=True):
                xs = self._block_programs[block.graphdef](block.state, xs, rest, masks, skips=skips)
            return self._finish(self._outer_state, xs, rest)

    def compile_ahead(self, *inputs: object, perturbations: BatchedPerturbationConfig) -> None:
        """Compiles what `self(*inputs, perturbations=perturbations)` runs, without running it: `inputs`
        as `jax.ShapeDtypeStruct`s with the shardings the call's arrays will have. Each program's
        outputs as compiled (shapes and shardings) are the next one's inputs, as in the call. A call
        from another thread while this compiles waits for it, then finds the programs compiled."""
        with self._compiling:
            self._compile(inputs, perturbations)

    def _compile(self, inputs: tuple, perturbations: BatchedPerturbationConfig) -> None:
        xs, rest = self._prepare.lower(self._outer_state, *inputs).compile().out_info
        outputs: dict[tuple, object] = {}  # one compilation per distinct program and inputs
        plan = perturbations.masked_at_blocks(len(self._blocks))
        for block, (skips, masks) in zip(self._blocks, plan, strict=True):
            key = (block.graphdef, skips, tuple(jax.tree.leaves(xs)))
            if key not in outputs:
                mask_shape = jax.ShapeDtypeStruct(masks.shape, masks.dtype, sharding=self._replicated)
                lowered = self._block_programs[block.graphdef].lower(block.state, xs, rest, mask_shape, skips=skips)
                outputs[key] = lowered.compile().out_info
            xs = outputs[key]
        self._finish.lower(self._outer_state, xs, rest).compile()

    def compiled(self) -> dict[str, int]:
        """How many programs each part has compiled: `block` counts one per distinct block structure
        and `MaskedSkips`, whatever the number of blocks."""
        return {
            "prepare": self._prepare._cache_size(),
            "block": sum(program._cache_size() for program in self._block_programs.values()),
            "finish": self._finish._cache_size(),
        }
