"""`ltx_jax.parallel.launch`: chains of multi-device programs never abort XLA's CPU client.

The chain runs in a child process: XLA aborts the whole process (SIGABRT) when a collective's
participants do not all arrive within 40 s, which pytest could not report.
"""

import os
import subprocess
import sys
import textwrap
import weakref

import jax
import jax.numpy as jnp
import pytest
from cpu_compile import xla_flags

from ltx_jax.parallel.launch import Launcher, launched

# 200 chained all-reduce programs on 8 CPU devices, dispatched without waiting: XLA's CPU client
# aborted every one of 3 runs on a 2-core machine (48 programs: aborted; 32: passed), and passed
# every run through `launch`.
CHAIN = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from ltx_jax.parallel.launch import launched
mesh = jax.make_mesh((8,), ("sp",))
w = jax.device_put(jnp.full((64, 64), 0.01), NamedSharding(mesh, P("sp", None)))  # split over the sum
layer = jax.jit(lambda x, w: jnp.tanh(x @ w), donate_argnums=(0,))  # an all-reduce on every device
layer = {wrap}(layer)
x = jax.device_put(jnp.ones((4, 64)), NamedSharding(mesh, P()))
for _ in range(200):
    x = layer(x, w)
print(float(x.sum()))
"""
CHAIN_TIMEOUT_S = 150  # XLA's own abort comes after 40 s of waiting; a pass takes a few seconds


def run_chain(wrap: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLA_FLAGS": xla_flags(8), "JAX_PLATFORMS": "cpu"}
    code = textwrap.dedent(CHAIN.format(wrap=wrap))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=CHAIN_TIMEOUT_S, check=False
    )


def test_a_long_chain_of_collective_programs_completes_through_launch():
    result = run_chain("launched")
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_launcher_waits_once_more_than_its_bound_are_unfinished(monkeypatch):
    waited = []
    monkeypatch.setattr(jax, "block_until_ready", lambda xs: waited.append(len(xs)))
    launcher = Launcher(max_in_flight=3)
    outputs = [launcher(jnp.add, jnp.ones(2), i) for i in range(5)]
    assert waited == [1, 1]  # the 4th and 5th launches each waited for one earlier launch's output
    assert len(outputs) == 5


def test_donated_outputs_are_skipped_for_the_next_one_that_exists():
    launcher = Launcher(max_in_flight=2)
    step = jax.jit(lambda x: x + 1, donate_argnums=(0,))
    x = jnp.zeros(4)
    for _ in range(10):  # each output is donated to the next launch; the newest always exists
        x = launcher(step, x)
    assert float(x[0]) == 10.0


def test_outputs_are_held_weakly():
    launcher = Launcher(max_in_flight=4)
    y = launcher(jnp.multiply, jnp.ones(3), 2.0)
    ref = weakref.ref(y)
    del y
    assert ref() is None  # the launcher's bookkeeping keeps no array alive


def test_launched_keeps_the_programs_own_attributes():
    program = launched(jax.jit(lambda x: x * 2))
    assert program.lower(jnp.ones(2)).compile() is not None
    assert float(program(jnp.ones(2))[0]) == 2.0


def test_a_bound_below_one_is_refused():
    with pytest.raises(ValueError, match="max_in_flight must be at least 1, got 0"):
        Launcher(max_in_flight=0)
