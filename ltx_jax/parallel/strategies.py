"""The context-parallel strategies of `SequenceParallel`: layout checks and the attention they inject.

| strategy       | mesh                          | video self-attention                       | heads must divide by |
|----------------|-------------------------------|--------------------------------------------|----------------------|
| "ulysses"      | 1-D "sp" (`make_mesh(n)`)     | all-to-all heads <-> tokens                | n                    |
| "allgather_kv" | 1-D "sp"                      | local queries, all-gathered K/V            | -                    |
| "ring"         | 1-D "sp"                      | local queries, K/V blocks rotate (ppermute)| -                    |
| "usp"          | 2-D ("ring", "ulysses")       | all-to-all inside "ulysses", ring over     | U (the ulysses size) |
|                | (`make_mesh(n, ulysses=U)`)   | "ring"                                     |                      |

"ring" and "usp" attend block by block with a kernel that returns the log-sum-exp (`ring_kernel`):
"cudnn" (cuDNN flash attention), "xla" (scores materialized) or "auto" (the default: cuDNN where it
can run the block, XLA elsewhere); see `ltx_jax.model.attention_backends`.
"""

from typing import Literal, get_args

from jax.sharding import Mesh

from ltx_jax.config import LTXConfig
from ltx_jax.model.attention_backends import LocalAttentionFn, RingKernel, block_attention_backend, check_ring_kernel
from ltx_jax.parallel.allgather import AllGatherKVAttention
from ltx_jax.parallel.exchange import AllToAll
from ltx_jax.parallel.mesh import RING_AXIS, SP_AXIS, ULYSSES_AXIS, USP_AXES, check_mesh, sequence_axes
from ltx_jax.parallel.ring import RingAttention
from ltx_jax.parallel.ulysses import UlyssesAttention

Strategy = Literal["ulysses", "allgather_kv", "ring", "usp"]
SequenceAttention = UlyssesAttention | AllGatherKVAttention | RingAttention


RING_STRATEGIES = ("ring", "usp")


def check_layout(cfg: LTXConfig, mesh: Mesh, strategy: str, backend: object, ring_kernel: str = "auto") -> None:
    """Raises `ValueError` naming the value and the fix if `strategy` cannot run `cfg` on `mesh`, or
    `ring_kernel` cannot serve it."""
    if strategy not in get_args(Strategy):
        raise ValueError(f"strategy must be one of {list(get_args(Strategy))}, got {strategy!r}.")
    check_mesh(mesh)
    axes = sequence_axes(mesh)
    if strategy == "usp" and axes != USP_AXES:
        raise ValueError(
            f"strategy='usp' needs a 2-D mesh with axes {USP_AXES}, got axes {mesh.axis_names}. "
            f"Build one with make_mesh(n, ulysses=u)."
        )
    if strategy != "usp" and axes != SP_AXIS:
        raise ValueError(
            f"strategy={strategy!r} runs on a 1-D mesh with an axis {SP_AXIS!r}, got axes {mesh.axis_names}. "
            "Use strategy='usp' on this mesh, or build one with make_mesh(n)."
        )
    if _is_ffi(backend) and strategy != "ulysses":
        raise ValueError(
            f"backend={backend!r} is a head exchange over a whole 1-D mesh, used by strategy='ulysses' only; "
            f"got strategy={strategy!r}. Use backend='all_to_all'."
        )
    if ring_kernel != "auto":
        if strategy not in RING_STRATEGIES:
            raise ValueError(
                f"ring_kernel={ring_kernel!r} is the block attention of strategy='ring' and 'usp'; "
                f"got strategy={strategy!r}. Leave ring_kernel unset."
            )
        check_ring_kernel(ring_kernel)
    if strategy in ("ulysses", "usp"):
        _check_heads(cfg, mesh.shape[SP_AXIS if strategy == "ulysses" else ULYSSES_AXIS], strategy)


def _is_ffi(backend: object) -> bool:
    """Whether `backend` is the CUDA peer-to-peer exchange, by name or as an `FfiAllToAll`."""
    if isinstance(backend, str):
        return backend == "ffi"
    from ltx_jax.ffi import FfiAllToAll  # noqa: PLC0415 - only when a callable is passed

    return isinstance(backend, FfiAllToAll)


def _check_heads(cfg: LTXConfig, degree: int, strategy: str) -> None:
    """The head exchange gives each device heads/degree heads of video self-attention and of
    video-to-audio attention (audio heads)."""
    streams = [("num_attention_heads", cfg.num_attention_heads)] if cfg.has_video else []
    if cfg.has_video and cfg.has_audio:
        streams.append(("audio_num_attention_heads", cfg.audio_num_attention_heads))
    for name, heads in streams:
        if heads % degree == 0:
            continue
        if strategy == "ulysses":
            what, fix = "the mesh size", f"Use a mesh size that divides {heads}."
        else:
            what = "the ulysses degree"
            fix = f"Use make_mesh(n, ulysses=u) with u dividing {heads}, or strategy='ring'."
        raise ValueError(
            f"{name} ({heads}) must be divisible by {what} ({degree}): {strategy} gives each device "
            f"{name}/{degree} heads. {fix}"
        )


def sequence_attention(
    strategy: Strategy,
    mesh: Mesh,
    *,
    local: LocalAttentionFn,
    all_to_all: AllToAll,
    valid_tokens: int,
    padded_tokens: int,
    ring_kernel: RingKernel = "auto",
) -> SequenceAttention:
    """The object whose `video_self_attention` and `video_to_audio` replace `attn1` and
    `video_to_audio_attn` inside the shard_map (layout already checked by `check_layout`).
    `ring_kernel`: the block attention of "ring" and "usp"."""
    tokens = {"valid_tokens": valid_tokens, "padded_tokens": padded_tokens}
    if strategy == "ulysses":
        n = mesh.shape[SP_AXIS]
        return UlyssesAttention(local=local, all_to_all=all_to_all, axis_name=SP_AXIS, mesh_size=n, **tokens)
    if strategy == "allgather_kv":
        return AllGatherKVAttention(local=local, axis_name=SP_AXIS, mesh_size=mesh.shape[SP_AXIS], **tokens)
    ring = {**tokens, "block_attention": block_attention_backend(ring_kernel)}
    if strategy == "ring":
        return RingAttention(ring_axis=SP_AXIS, ring_size=mesh.shape[SP_AXIS], **ring)
    return RingAttention(
        ring_axis=RING_AXIS,
        ring_size=mesh.shape[RING_AXIS],
        ulysses_axis=ULYSSES_AXIS,
        ulysses_size=mesh.shape[ULYSSES_AXIS],
        all_to_all=all_to_all,
        **ring,
    )
