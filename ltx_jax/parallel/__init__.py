"""Sequence parallelism: meshes, `SequenceParallel` and its strategies (Ulysses, all-gather-KV, ring, USP)."""

from ltx_jax.model.attention_backends import attention_with_lse
from ltx_jax.parallel.mesh import RING_AXIS, SP_AXIS, ULYSSES_AXIS, make_mesh
from ltx_jax.parallel.sequence_parallel import SequenceParallel
from ltx_jax.parallel.strategies import Strategy

__all__ = ["RING_AXIS", "SP_AXIS", "ULYSSES_AXIS", "SequenceParallel", "Strategy", "attention_with_lse", "make_mesh"]
