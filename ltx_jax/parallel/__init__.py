"""Sequence parallelism: the mesh and the Ulysses wrapper."""

from ltx_jax.parallel.mesh import SP_AXIS, make_mesh
from ltx_jax.parallel.sequence_parallel import SequenceParallel

__all__ = ["SP_AXIS", "SequenceParallel", "make_mesh"]
