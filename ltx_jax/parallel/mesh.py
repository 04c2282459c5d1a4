"""The device mesh that sequence parallelism runs on: one axis, named "sp"."""

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

SP_AXIS = "sp"


def make_mesh(n: int, axis_name: str = SP_AXIS) -> Mesh:
    """A 1-D mesh over the first `n` devices (all processes' devices in a multi-process run).

    Raises `ValueError` if fewer than `n` devices are present. The axis type is Auto, so arrays on
    it need no explicit sharding annotations from the caller.
    """
    available = jax.device_count()
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"make_mesh: n must be a positive integer, got {n!r}.")
    if n > available:
        raise ValueError(
            f"make_mesh: a mesh of {n} devices needs {n} devices but {available} are present "
            f"({jax.default_backend()}). Use a smaller mesh, or on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before JAX is imported."
        )
    if jax.process_count() > 1 and n != available:
        raise ValueError(
            f"make_mesh: in a {jax.process_count()}-process run the mesh must span all {available} devices, got n={n}."
        )
    return Mesh(np.asarray(jax.devices()[:n]), (axis_name,), axis_types=(AxisType.Auto,))
