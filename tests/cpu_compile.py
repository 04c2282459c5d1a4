"""XLA flags for the tests' CPU programs (conftest.py sets them; child processes that set up devices of
their own add them to theirs).

Compiling, not running, is most of a CPU test's time (tiny models, hundreds of programs; in
test_sequence_parallel, test_fp8_attention and the flows' parity test, 258 of 411 s were XLA's
compiling, 55 lowering and 39 tracing). Two settings cut it:
- without LLVM's optimisations a test compiles in about half the time (tests/test_generate.py's
  mesh-against-one-device test: 66 s -> 30 s on the 2-core CI machine);
- XLA's older loop emitters instead of its fusion emitters halve it again (a tiny DiT's forward on 8
  devices and on one: 10.8 s -> 4.7 s of compiling, its output bit for bit the same).
Neither changes the arithmetic (XLA's CPU backend does not use fast math either way), so the parity
tolerances hold as they are. Not where a GPU is: its kernels' speed is measured there.
"""

import os

from ltx_jax.cli.devices import has_gpu

NO_LLVM_OPTIMISATIONS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
CPU_COMPILE_FLAGS = "" if has_gpu() else f"{NO_LLVM_OPTIMISATIONS} --xla_cpu_use_fusion_emitters=false"


def xla_flags(device_count: int) -> str:
    """`XLA_FLAGS` for `device_count` simulated CPU devices, with `CPU_COMPILE_FLAGS`."""
    return f"--xla_force_host_platform_device_count={device_count} {CPU_COMPILE_FLAGS}".strip()


def set_xla_flags(device_count: int) -> None:
    """Before JAX starts its backends: this process's `XLA_FLAGS` (those it was given, then ours)."""
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_flags(device_count)}".strip()
