"""`SequenceParallel`: run an `LTXModel` with its video tokens split over a mesh.

Source: ltx-core's `multigpu/transformer/sequence_parallel.py` (pad, tile, attention manager,
gather). Differences: one jitted `shard_map` over the whole forward instead of one process per GPU;
padded video keys are also masked in video-to-audio attention; without a caller mask the padding
is a key length, never a dense mask; the caller's model is not modified (its parameters are placed
replicated on the mesh, values unchanged); besides ltx-core's Ulysses, the strategies of
`ltx_jax.parallel.strategies` (all-gather-KV, ring, Ulysses x ring).
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.modality import Modality
from ltx_jax.model.model import DIT_COMPILER_OPTIONS, LTXModel, validate_inputs
from ltx_jax.parallel.blockwise import RingKernel
from ltx_jax.parallel.exchange import AllToAll, ExchangeBackend, exchange_backend
from ltx_jax.parallel.mesh import SequenceAxes, sequence_axes, sequence_size
from ltx_jax.parallel.sharding import gather, sharded_axis, spec_of
from ltx_jax.parallel.strategies import RING_STRATEGIES, Strategy, check_layout, sequence_attention

logger = logging.getLogger(__name__)

BLOCKS = "transformer_blocks"
DEFAULT_MAX_TOKENS = 32768


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
        model: the DiT. Its parameters are placed replicated on the mesh (values unchanged), except
            those `load_checkpoint(..., shard_weights=True)` sharded over it, which stay sharded and
            are gathered block by block inside the forward.
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
    ) -> None:
        check_layout(model.cfg, mesh, strategy, backend, ring_kernel)
        self.model = model
        self.mesh = mesh
        self.strategy = strategy
        self.axes = sequence_axes(mesh)
        self.mesh_size = sequence_size(mesh)
        self.max_tokens = max_tokens
        self.ring_kernel = ring_kernel if strategy in RING_STRATEGIES else None
        self._all_to_all = exchange_backend(backend, mesh)
        self._replicated = NamedSharding(mesh, P())
        nnx.update(model, jax.tree.map(self._place_param, nnx.state(model)))
        # nnx.state walks the module graph in Python (~25 ms per 8 blocks): take it once. It holds
        # the model's own Variable objects, so later in-place weight updates are seen.
        self._graphdef, self._state = nnx.split(model)
        self._state_specs = jax.tree.map(lambda x: spec_of(x, self.axes), self._state)
        self._flat_specs = {path: spec_of(v.get_value(), self.axes) for path, v in nnx.to_flat_state(self._state)}
        self._shard_weights = any(sharded_axis(spec, self.axes) is not None for spec in self._flat_specs.values())
        jit = functools.partial(jax.jit, static_argnames=("perturbations",), compiler_options=DIT_COMPILER_OPTIONS)
        self._sharded = jit(self._sharded_forward)
        self._replicated_forward = jit(self._plain_forward)
        logger.info(
            "SequenceParallel: %s%s over %d devices %s, head exchange %r, %s weights",
            strategy,
            f" (block attention {self.ring_kernel})" if self.ring_kernel else "",
            self.mesh_size,
            dict(mesh.shape),
            backend,
            "sharded" if self._shard_weights else "replicated",
        )

    def _place_param(self, x: jax.Array) -> jax.Array:
        """Parameters sharded over this mesh by `load_checkpoint(shard_weights=True)` stay so; the
        rest is replicated on the mesh."""
        sharding = getattr(x, "sharding", None)
        on_this_mesh = isinstance(sharding, NamedSharding) and sharding.mesh == self.mesh
        if on_this_mesh and sharded_axis(sharding.spec, self.axes) is not None:
            return x
        return jax.device_put(x, self._replicated)

    def __call__(
        self, video: Modality | None, audio: Modality | None, perturbations: BatchedPerturbationConfig | None = None
    ) -> tuple[jax.Array | None, jax.Array | None]:
        validate_inputs(self.model.cfg, video, audio, perturbations)
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
        return self._sharded(self._state, video, audio, perturbations=perturbations)

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

    def _plain_forward(
        self, state: nnx.State, video: Modality | None, audio: Modality | None, perturbations: BatchedPerturbationConfig
    ) -> tuple[jax.Array | None, jax.Array | None]:
        return nnx.merge(self._graphdef, state).forward(video, audio, perturbations)

    def _sharded_forward(
        self, state: nnx.State, video: Modality, audio: Modality | None, perturbations: BatchedPerturbationConfig
    ) -> tuple[jax.Array, jax.Array | None]:
        tokens = video.latent.shape[1]
        video = pad_video(video, padded_length(tokens, self.mesh_size))
        attention = sequence_attention(
            self.strategy,
            self.mesh,
            local=self.model.attention_ops.default,
            all_to_all=self._all_to_all,
            valid_tokens=tokens,
            padded_tokens=video.latent.shape[1],
            ring_kernel=self.ring_kernel,
        )
        attention_ops = self.model.attention_ops.with_overrides(
            attn1=attention.video_self_attention, video_to_audio_attn=attention.video_to_audio
        )

        def local_forward(
            state: nnx.State, video: Modality, audio: Modality | None
        ) -> tuple[jax.Array, jax.Array | None]:
            model = nnx.merge(self._graphdef, state)
            blocks = None
            if self._shard_weights:
                self._gather(model, exclude=BLOCKS)
                blocks = [_GatheringBlock(block, self, (BLOCKS, i)) for i, block in enumerate(model.transformer_blocks)]
            vx, ax = model.forward(video, audio, perturbations, attention_ops=attention_ops, blocks=blocks)
            return lax.all_gather(vx, self.axes, axis=1, tiled=True), ax

        vx, ax = jax.shard_map(
            local_forward,
            mesh=self.mesh,
            in_specs=(self._state_specs, video_specs(video, self.axes), replicated_specs(audio)),
            out_specs=(P(), P()),
            check_vma=False,
        )(state, video, audio)
        return vx[:, :tokens], ax

    def _gather(self, module: nnx.Module, prefix: tuple = (), exclude: str | None = None) -> None:
        """Inside the shard_map: replaces `module`'s sharded parameters with whole ones."""
        state = nnx.state(module)
        for path, variable in nnx.to_flat_state(state):
            spec = self._flat_specs[prefix + path]
            if path[0] != exclude and sharded_axis(spec, self.axes) is not None:
                variable.set_value(gather(variable.get_value(), spec, self.axes))
        nnx.update(module, state)


class _GatheringBlock:
    """A transformer block whose FSDP-sharded parameters are all-gathered right before it runs,
    so one block's full weights are live at a time."""

    def __init__(self, block: nnx.Module, sp: SequenceParallel, prefix: tuple) -> None:
        self.block, self.sp, self.prefix = block, sp, prefix

    def __call__(self, *args: object) -> tuple:
        self.sp._gather(self.block, self.prefix)
        return self.block(*args)
