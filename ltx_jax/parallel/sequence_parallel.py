"""`SequenceParallel`: run an `LTXModel` with its video tokens split over a mesh.

Source: ltx-core's `multigpu/transformer/sequence_parallel.py` (pad, tile, attention manager,
gather). Differences: jitted `shard_map`s over the forward (one per distinct block, `block_programs`)
instead of one process per GPU; padded video keys are also masked in video-to-audio attention;
without a caller mask the padding is a key length, never a dense mask; the caller's model is not
modified (this object places a copy of its parameters on the mesh); besides ltx-core's Ulysses,
the strategies of `ltx_jax.parallel.strategies` (all-gather-KV, ring, Ulysses x ring).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.attention import AttentionOps
from ltx_jax.model.attention_backends import LocalAttentionFn, RingKernel
from ltx_jax.model.modality import Modality
from ltx_jax.model.model import DIT_COMPILER_OPTIONS, LTXModel, validate_inputs
from ltx_jax.model.transformer_args import TransformerArgs
from ltx_jax.parallel.block_programs import Block, BlockPrograms
from ltx_jax.parallel.exchange import AllToAll, ExchangeBackend, exchange_backend
from ltx_jax.parallel.mesh import SequenceAxes, sequence_axes, sequence_size
from ltx_jax.parallel.sharding import GatheredBlock, gather_state, sharded_axis, spec_of
from ltx_jax.parallel.strategies import (
    RING_STRATEGIES,
    SequenceAttention,
    Strategy,
    check_layout,
    sequence_attention,
)

logger = logging.getLogger(__name__)

BLOCKS = "transformer_blocks"
DEFAULT_MAX_TOKENS = 32768


def _placed_like(x: jax.ShapeDtypeStruct, sharding: NamedSharding) -> jax.ShapeDtypeStruct:
    """`x` as `SequenceParallel._place` places an array of its shape and dtype."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding, weak_type=x.weak_type)


def padded_length(tokens: int, mesh_size: int) -> int:
    """`tokens` rounded up to a multiple of `mesh_size`."""
    return -(-tokens // mesh_size) * mesh_size


def pad_attention_mask(mask: jax.Array | None, tokens: int, padded: int) -> jax.Array | None:
    """Extends a caller's self-attention mask to `padded` tokens.

    Pad keys get 0 for every query; pad queries attend to all valid keys, so no row is fully masked.
    A broadcast key mask `(B|1, 1, T)` stays O(T): only its key axis is padded.
    """
    if mask is None or padded == tokens:
        return mask
    if mask.shape[-2] == 1:
        return jnp.pad(mask, ((0, 0), (0, 0), (0, padded - tokens)))
    full = jnp.zeros((mask.shape[0], padded, padded), mask.dtype).at[:, :tokens, :tokens].set(mask)
    return full.at[:, tokens:, :tokens].set(1)


def pad_video(video: Modality, padded: int) -> Modality:
    """Pads every per-token field of `video` with zeros up to `padded` tokens."""
    tokens = video.latent.shape[1]

    def pad(x: jax.Array | None, axis: int) -> jax.Array | None:
        if x is None or x.shape[axis] != tokens or padded == tokens:
            return x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, padded - tokens)
        return jnp.pad(x, widths)

    return dataclasses.replace(
        video,
        latent=pad(video.latent, 1),
        timesteps=pad(video.timesteps, 1),
        positions=pad(video.positions, 2),
        keyframes_mask=pad(video.keyframes_mask, 1),
        attention_mask=pad_attention_mask(video.attention_mask, tokens, padded),
    )


def video_specs(video: Modality, axis_name: SequenceAxes) -> Modality:
    """Shard the per-token fields of the (padded) video over `axis_name`; replicate the rest."""
    tokens = video.latent.shape[1]

    def spec(x: jax.Array | None, axis: int) -> P | None:
        if x is None:
            return None
        return P(*([None] * axis), axis_name) if x.ndim > axis and x.shape[axis] == tokens else P()

    return dataclasses.replace(
        video,
        latent=spec(video.latent, 1),
        sigma=P(),
        timesteps=spec(video.timesteps, 1),
        positions=spec(video.positions, 2),
        context=P(),
        context_mask=None if video.context_mask is None else P(),
        attention_mask=None if video.attention_mask is None else P(),
        keyframes_mask=spec(video.keyframes_mask, 1),
    )


def replicated_specs(modality: Modality | None) -> Modality | None:
    return None if modality is None else jax.tree.map(lambda _: P(), modality)


class SequenceParallel:
    """`model` with its video tokens split over `mesh` (Ulysses, all-gather-KV, ring or USP attention).

    `sp(video, audio, perturbations)` returns what `model(video, audio, perturbations)` returns,
    for any token count: video tokens are padded to a multiple of the mesh size and the padding is
    masked everywhere and dropped from the output. Outputs are replicated on the mesh.

    Args:
        model: the DiT. Its parameters are read once, when this object is built, into a copy of
            its own: placed replicated on the mesh (the same arrays where they already are), except
            those `load_checkpoint(..., shard_weights=True)` sharded over it, which stay sharded and
            are gathered block by block inside the forward (`sharding.GatheredBlock`). `model`
            itself is never modified, and changing it afterwards does not change this forward:
            build a new `SequenceParallel` for new weights.
        mesh: a mesh with an `"sp"` axis (`ltx_jax.parallel.make_mesh(n)`), or for "usp" one with
            axes ("ring", "ulysses") (`make_mesh(n, ulysses=u)`).
        backend: the head exchange: "all_to_all" (`jax.lax.all_to_all`), "ffi" (CUDA P2P kernel,
            "ulysses" only), or an all-to-all callable such as
            `ltx_jax.ffi.FfiAllToAll(mesh, command_buffer=True)`.
        strategy: "ulysses" (heads exchanged over the whole mesh; heads divisible by n),
            "allgather_kv" (K/V all-gathered), "ring" (K/V blocks rotate; any head count) or "usp"
            (Ulysses inside the "ulysses" axis, ring across "ring"; heads divisible by u).
            See docs/sequence-parallel.md for when to use which.
        max_tokens: the largest padded video token count accepted.
        ring_kernel: the block attention of "ring" and "usp": "cudnn" (cuDNN flash attention with
            its log-sum-exp; bf16/fp16 on GPU, raises where cuDNN cannot run a block), "xla" (scores
            materialized, any dtype) or "auto" (cuDNN where it can run the block, else XLA: float32
            models and CPUs get XLA).
        block_programs: run each transformer block as its own compiled program, shared by every
            block with the same structure and kinds of skipped attention (`MaskedSkips`; which samples
            skip is an input, `ltx_jax.parallel.block_programs`):
            compiling takes the time of one block instead of all of them. False compiles the whole
            forward as one program, blocks unrolled (what `lower` shows either way).
    """

    def __init__(
        self,
        model: LTXModel,
        mesh: Mesh,
        *,
        backend: ExchangeBackend | AllToAll = "all_to_all",
        strategy: Strategy = "ulysses",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        ring_kernel: RingKernel = "auto",
        block_programs: bool = True,
    ) -> None:
        check_layout(model.cfg, mesh, strategy, backend, ring_kernel)
        self.cfg = model.cfg
        self.mesh = mesh
        self.strategy = strategy
        self.axes = sequence_axes(mesh)
        self.mesh_size = sequence_size(mesh)
        self.max_tokens = max_tokens
        self.ring_kernel = ring_kernel if strategy in RING_STRATEGIES else None
        self._attention_ops = model.attention_ops
        self._all_to_all = exchange_backend(backend, mesh)
        self._replicated = NamedSharding(mesh, P())
        self._graphdef, self._state, self.shard_weights = self._own_copy(model)
        self._state_specs = jax.tree.map(lambda x: spec_of(x, self.axes), self._state)
        jit = functools.partial(jax.jit, static_argnames=("perturbations",), compiler_options=DIT_COMPILER_OPTIONS)
        self._sharded = jit(self._sharded_forward)
        self._replicated_forward = jit(self._plain_forward)
        self.block_programs = block_programs
        self._programs: dict[tuple, BlockPrograms] = {}
        self._programs_lock = threading.Lock()
        self._pad = jax.jit(pad_video, static_argnums=1)
        logger.info(
            "SequenceParallel: %s%s over %d devices %s, head exchange %r, %s weights",
            strategy,
            f" (block attention {self.ring_kernel})" if self.ring_kernel else "",
            self.mesh_size,
            dict(mesh.shape),
            backend,
            "sharded" if self.shard_weights else "replicated",
        )

    def _own_copy(self, model: LTXModel) -> tuple[nnx.GraphDef, nnx.State, bool]:
        """This object's copy of `model`: its graph and a state of its own (so the caller's model is
        never modified), the arrays placed on the mesh (the same arrays where they already are), each
        FSDP-sharded block wrapped to gather itself when it runs. The graph is walked once where the
        weights are replicated: each `nnx.split`, `nnx.state` or `nnx.merge` walks it in Python, and
        with three walks and a `device_put` per array a `SequenceParallel` of 48 blocks took 1.0-1.3 s
        to build, against 0.4-0.5 s now (2-core machine; benchmarks/results/2026-12-03/README.md)."""
        graphdef, state = nnx.split(model)
        state = self._placed(state)
        specs = {path: spec_of(v.get_value(), self.axes) for path, v in nnx.to_flat_state(state)}
        if not any(sharded_axis(spec, self.axes) is not None for spec in specs.values()):
            return graphdef, state, False
        self._outer_specs = {path: spec for path, spec in specs.items() if path[0] != BLOCKS}
        copy = nnx.merge(graphdef, state)
        copy.transformer_blocks = nnx.List(
            [
                GatheredBlock(block, {p[2:]: spec for p, spec in specs.items() if p[:2] == (BLOCKS, i)}, self.axes)
                for i, block in enumerate(copy.transformer_blocks)
            ]
        )
        return *nnx.split(copy), True

    def _placed(self, state: nnx.State) -> nnx.State:
        """Parameters sharded over this mesh by `load_checkpoint(shard_weights=True)` stay so; the
        rest is replicated on the mesh, in one `device_put` for all of them (one call per array costs
        its Python overhead 4,186 times at 48 blocks)."""
        leaves, treedef = jax.tree.flatten(state)
        moving = [i for i, x in enumerate(leaves) if not self._sharded_here(x)]
        for i, placed in zip(moving, jax.device_put([leaves[i] for i in moving], self._replicated), strict=True):
            leaves[i] = placed
        return jax.tree.unflatten(treedef, leaves)

    def _sharded_here(self, x: jax.Array) -> bool:
        sharding = getattr(x, "sharding", None)
        on_this_mesh = isinstance(sharding, NamedSharding) and sharding.mesh == self.mesh
        return on_this_mesh and sharded_axis(sharding.spec, self.axes) is not None

    def __call__(
        self, video: Modality | None, audio: Modality | None, perturbations: BatchedPerturbationConfig | None = None
    ) -> tuple[jax.Array | None, jax.Array | None]:
        validate_inputs(self.cfg, video, audio, perturbations)
        perturbations = perturbations or BatchedPerturbationConfig.empty((video or audio).latent.shape[0])
        video, audio = self._place(video), self._place(audio)
        if video is None:
            return self._replicated_forward(self._state, None, audio, perturbations=perturbations)
        padded = padded_length(video.latent.shape[1], self.mesh_size)
        if padded > self.max_tokens:
            raise ValueError(
                f"Total video token count ({padded}) exceeds max_tokens ({self.max_tokens}). "
                "Use a smaller resolution or fewer frames."
            )
        if self.block_programs:
            return self._by_blocks(video, audio, perturbations)
        return self._sharded(self._state, video, audio, perturbations=perturbations)

    def compile_ahead(
        self, video: Modality, audio: Modality | None, perturbations: BatchedPerturbationConfig | None = None
    ) -> None:
        """Compiles what `self(video, audio, perturbations)` runs, without running it: `video` and
        `audio` hold `jax.ShapeDtypeStruct`s (`ltx_jax.pipeline.stages.first_forward_inputs`). A call
        from another thread while the block programs compile waits for them, then finds them compiled.
        With `block_programs=False` nothing is compiled ahead."""
        validate_inputs(self.cfg, video, audio, perturbations)
        if not self.block_programs or video is None:
            return
        perturbations = perturbations or BatchedPerturbationConfig.empty(video.latent.shape[0])
        replicated = functools.partial(_placed_like, sharding=self._replicated)
        video, audio = jax.tree.map(replicated, video), jax.tree.map(replicated, audio)
        tokens = video.latent.shape[1]
        padded = padded_length(tokens, self.mesh_size)
        if padded > self.max_tokens:
            return  # the call raises the error
        if padded != tokens:
            video = self._pad.lower(video, padded).compile().out_info
        self._programs_for(tokens, video, audio).compile_ahead(video, audio, perturbations=perturbations)

    def _by_blocks(
        self, video: Modality, audio: Modality | None, perturbations: BatchedPerturbationConfig
    ) -> tuple[jax.Array, jax.Array | None]:
        tokens = video.latent.shape[1]
        padded = padded_length(tokens, self.mesh_size)
        if padded != tokens:
            video = self._pad(video, padded)
        vx, ax = self._programs_for(tokens, video, audio)(video, audio, perturbations=perturbations)
        return vx[:, :tokens], ax

    def _programs_for(self, tokens: int, video: Modality, audio: Modality | None) -> BlockPrograms:
        """The programs for these (padded) inputs, built once per token count and input shapes."""
        inputs = (video, audio)
        key = (tokens, jax.tree.structure(inputs), tuple(x.shape for x in jax.tree.leaves(inputs)))
        with self._programs_lock:  # `compile_ahead` may build them on another thread
            if key not in self._programs:
                self._programs[key] = self._build_programs(tokens, video, audio)
            return self._programs[key]

    def compiled(self) -> dict[str, int]:
        """How many programs the video forward has compiled: `whole` (block_programs=False), or the
        `prepare`, `block` and `finish` programs summed over the input shapes seen."""
        counts = {"whole": self._sharded._cache_size()}
        with self._programs_lock:
            built = list(self._programs.values())
        for programs in built:
            for part, count in programs.compiled().items():
                counts[part] = counts.get(part, 0) + count
        return counts

    @functools.cached_property
    def _parts(self) -> tuple[Block, list[Block]]:
        """This object's model split once into what is outside the blocks and the blocks themselves,
        each with its parameters' PartitionSpecs."""

        def part(module: nnx.Module) -> Block:
            graphdef, state = nnx.split(module)
            return Block(graphdef, state, jax.tree.map(lambda x: spec_of(x, self.axes), state))

        model = nnx.merge(self._graphdef, self._state)
        blocks = [part(block) for block in model.transformer_blocks]
        model.transformer_blocks = nnx.List([])
        return part(model), blocks

    def _build_programs(self, tokens: int, video: Modality, audio: Modality | None) -> BlockPrograms:
        """The prepare / block / finish programs for `tokens` video tokens padded to `video`'s count."""
        outer, blocks = self._parts

        def outer_model(state: nnx.State) -> LTXModel:
            if self.shard_weights:
                state = gather_state(state, self._outer_specs, self.axes)
            return nnx.merge(outer.graphdef, state)

        def finish(state: nnx.State, streams: tuple[TransformerArgs | None, ...]) -> tuple:
            vx, ax = outer_model(state).outputs(*streams)
            return lax.all_gather(vx, self.axes, axis=1, tiled=True), ax

        return BlockPrograms(
            self.mesh,
            self.axes,
            outer_state=outer.state,
            outer_specs=outer.specs,
            blocks=blocks,
            attention_ops=self._sequence_attention_ops(tokens, video.latent.shape[1]),
            prepare=lambda state, video, audio: outer_model(state).prepare_streams(video, audio),
            prepare_in_specs=(video_specs(video, self.axes), replicated_specs(audio)),
            finish=finish,
            finish_out_specs=(P(), P()),
        )

    def _sequence_attention_ops(self, tokens: int, padded: int) -> AttentionOps:
        """The attention functions inside the shard_map: the strategy's for `attn1` and `video_to_audio_attn`,
        and for the `attn1` that `quantize_fp8` marked, the strategy's around the fp8 local attention."""
        ops = self._attention_ops

        def around(local: LocalAttentionFn) -> SequenceAttention:
            return sequence_attention(
                self.strategy,
                self.mesh,
                local=local,
                all_to_all=self._all_to_all,
                valid_tokens=tokens,
                padded_tokens=padded,
                ring_kernel=self.ring_kernel,
            )

        attention = around(ops.default)
        ops = ops.with_overrides(attn1=attention.video_self_attention, video_to_audio_attn=attention.video_to_audio)
        fp8 = around(ops.fp8_local(self.axes, valid_tokens=tokens))  # "ring"/"usp" never call its local
        return ops.with_fp8_overrides(attn1=fp8.video_self_attention)

    def lower(
        self, video: Modality, audio: Modality | None, perturbations: BatchedPerturbationConfig | None = None
    ) -> jax.stages.Lowered:
        """The sharded forward lowered for these inputs: `.compile().as_text()` is the program each
        device runs (its collectives, its attention calls)."""
        validate_inputs(self.cfg, video, audio, perturbations)
        perturbations = perturbations or BatchedPerturbationConfig.empty(video.latent.shape[0])
        return self._sharded.lower(self._state, self._place(video), self._place(audio), perturbations=perturbations)

    def _place(self, modality: Modality | None) -> Modality | None:
        """Inputs as arrays replicated on the mesh; host values are built per process, shard by shard."""

        def place(x: jax.Array | np.ndarray) -> jax.Array:
            if isinstance(x, jax.Array) and x.is_fully_addressable and not self._replicated.is_fully_addressable:
                # A process-local array on a multi-process mesh: each process copies its own value to
                # its own devices (every process passes the same values), no transfer between hosts.
                devices = sorted(self._replicated.addressable_devices, key=lambda d: d.id)
                copies = [jax.device_put(x, d) for d in devices]
                return jax.make_array_from_single_device_arrays(x.shape, self._replicated, copies)
            if isinstance(x, jax.Array):
                return jax.device_put(x, self._replicated)
            host = np.asarray(x)
            return jax.make_array_from_callback(host.shape, self._replicated, lambda index: host[index])

        return None if modality is None else jax.tree.map(place, modality)

    def _local_model(self, state: nnx.State) -> LTXModel:
        """Inside the shard_map: the model on this device's parameters (its FSDP blocks gather themselves)."""
        if self.shard_weights:
            state = gather_state(state, self._outer_specs, self.axes)
        return nnx.merge(self._graphdef, state)

    def _plain_forward(
        self, state: nnx.State, video: None, audio: Modality, perturbations: BatchedPerturbationConfig
    ) -> tuple[None, jax.Array]:
        """Audio alone: the same work on every device."""
        ax = jax.shard_map(
            lambda state, audio: self._local_model(state).forward(None, audio, perturbations)[1],
            mesh=self.mesh,
            in_specs=(self._state_specs, replicated_specs(audio)),
            out_specs=P(),
            check_vma=False,
        )(state, audio)
        return None, ax

    def _sharded_forward(
        self, state: nnx.State, video: Modality, audio: Modality | None, perturbations: BatchedPerturbationConfig
    ) -> tuple[jax.Array, jax.Array | None]:
        tokens = video.latent.shape[1]
        video = pad_video(video, padded_length(tokens, self.mesh_size))
        attention_ops = self._sequence_attention_ops(tokens, video.latent.shape[1])

        def local_forward(
            state: nnx.State, video: Modality, audio: Modality | None
        ) -> tuple[jax.Array, jax.Array | None]:
            vx, ax = self._local_model(state).forward(video, audio, perturbations, attention_ops=attention_ops)
            return lax.all_gather(vx, self.axes, axis=1, tiled=True), ax

        vx, ax = jax.shard_map(
            local_forward,
            mesh=self.mesh,
            in_specs=(self._state_specs, video_specs(video, self.axes), replicated_specs(audio)),
            out_specs=(P(), P()),
            check_vma=False,
        )(state, video, audio)
        return vx[:, :tokens], ax
