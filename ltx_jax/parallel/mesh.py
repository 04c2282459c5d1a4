"""The device meshes that sequence parallelism runs on.

A 1-D mesh has one axis, "sp", that the video tokens are split over (strategies "ulysses",
"allgather_kv" and "ring"). A 2-D mesh for strategy "usp" has axes ("ring", "ulysses"): the tokens
are split over both (block `r * U + u` on device `(r, u)`), heads are exchanged inside the minor
"ulysses" axis (consecutive devices, so one node) and K/V blocks rotate along the "ring" axis.
"""

import math
from collections.abc import Iterable

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

SP_AXIS = "sp"
RING_AXIS = "ring"
ULYSSES_AXIS = "ulysses"
USP_AXES = (RING_AXIS, ULYSSES_AXIS)
SequenceAxes = str | tuple[str, ...]  # the mesh axis (or axes, major first) the video tokens are split over


def check_mesh(mesh: Mesh) -> None:
    """Raises `ValueError` for a mesh built by hand that no run can use: a device listed twice, devices of
    several platforms, or devices this process's JAX does not know (from another backend or session)."""
    devices = list(mesh.devices.flat)
    repeated = sorted({d.id for d in devices if devices.count(d) > 1})
    if repeated:
        raise ValueError(
            f"mesh: devices {repeated} appear more than once in its {len(devices)} entries; each device may be "
            "listed once. Build the mesh with ltx_jax.parallel.make_mesh(n)."
        )
    platforms = sorted({d.platform for d in devices})
    if len(platforms) > 1:
        raise ValueError(f"mesh: its devices mix platforms {platforms}; use devices of one platform (make_mesh(n)).")
    known = set(jax.devices(platforms[0]))
    unknown = [d for d in devices if d not in known]
    if unknown:
        raise ValueError(
            f"mesh: devices {unknown} are not among this process's {len(known)} {platforms[0]} devices "
            f"(jax.devices()); build the mesh from them, e.g. make_mesh(n) with n <= {len(known)}."
        )


def make_mesh(n: int, axis_name: str = SP_AXIS, *, ulysses: int | None = None) -> Mesh:
    """A mesh over the first `n` devices (all processes' devices in a multi-process run).

    Without `ulysses`: 1-D, axis `axis_name`. With `ulysses=u`: 2-D `(n // u, u)`, axes
    ("ring", "ulysses"), for `SequenceParallel(..., strategy="usp")`; `u` must divide `n`.
    Raises `ValueError` if fewer than `n` devices are present. The axis types are Auto, so arrays
    on it need no explicit sharding annotations from the caller.
    """
    available = jax.device_count()
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"make_mesh: n must be a positive integer, got {n!r}.")
    if ulysses is not None and (not isinstance(ulysses, int) or ulysses < 1 or n % ulysses):
        raise ValueError(
            f"make_mesh: ulysses must be a positive divisor of n={n} (the Ulysses degree of a ring x ulysses "
            f"mesh), got {ulysses!r}. Use one of {[d for d in range(1, n + 1) if n % d == 0]}."
        )
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
    devices = np.asarray(jax.devices()[:n])
    if ulysses is None:
        return Mesh(devices, (axis_name,), axis_types=(AxisType.Auto,))
    return Mesh(devices.reshape(n // ulysses, ulysses), USP_AXES, axis_types=(AxisType.Auto,) * 2)


def sequence_axes(mesh: Mesh) -> SequenceAxes:
    """ "sp" for a 1-D sequence mesh, ("ring", "ulysses") for a 2-D one. Raises for any other mesh."""
    if SP_AXIS in mesh.axis_names:
        return SP_AXIS
    if all(name in mesh.axis_names for name in USP_AXES):
        return USP_AXES
    raise ValueError(
        f"mesh must have an axis named {SP_AXIS!r} (make_mesh(n) builds one) or the axes {USP_AXES} "
        f"(make_mesh(n, ulysses=u)), got {mesh.axis_names}."
    )


def sequence_size(mesh: Mesh) -> int:
    """How many devices the video tokens are split over."""
    axes = sequence_axes(mesh)
    return math.prod(mesh.shape[name] for name in ((axes,) if isinstance(axes, str) else axes))


def first_simulated_cpu_device(devices: Iterable[jax.Device]) -> jax.Device | None:
    """The first of `devices` where they are several simulated CPU devices of this process (they share the host's
    memory and cores, so a small program runs better on one of them than replicated or split over all, whose
    collectives rendezvous every device's thread on the same cores); None otherwise: one device, an accelerator,
    or devices of other processes (each process must take part in the mesh's programs)."""
    devices = set(devices)
    if len(devices) <= 1 or any(d.platform != "cpu" or d.process_index != jax.process_index() for d in devices):
        return None
    return min(devices, key=lambda d: d.id)
