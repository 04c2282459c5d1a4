"""One of N processes (one GPU each, jax.distributed) checking backend="ffi" in its CUDA IPC mode.

Usage: python tests/ffi_multiprocess_worker.py PORT PROCESS_ID NUM_PROCESSES
(the library is LTX_JAX_FFI_LIBRARY if set, else the build cache of `python -m ltx_jax.ffi.build`;
benchmarks/device/ffi_multiprocess.sh and tests/test_ffi.py launch it.) Prints one PASS/FAIL line
per check and exits 1 if any failed:
  a. FfiAllToAll on the N-process mesh equals lax.all_to_all bit for bit (send and gather heads,
     several shapes, bf16 and f32, 3 exchanges per program, programs back to back), and 5
     send/gather round trips with the CUDA-graph compatible target return the input;
  b. the SP DiT forward with backend="ffi" equals backend="all_to_all" bit for bit (f32, bf16);
  c. a missing peer: process 0 runs an exchange that process 1 skips and must get AllToAllError
     naming rank 0 and the missing rank 1 after the 2 s timeout; then process 1 runs it and must
     stop at once, reporting that a peer failed (the dead flag crossed processes).
"""

import os
import sys
import time
import traceback

import jax

port, process_id, num_processes = (int(a) for a in sys.argv[1:4])
# local_device_ids keeps every GPU visible to CUDA (IPC needs it), unlike CUDA_VISIBLE_DEVICES.
jax.distributed.initialize(
    f"127.0.0.1:{port}", num_processes, process_id, local_device_ids=[process_id], initialization_timeout=60
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from gpu_case import SP_CFG  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.distributed import global_state  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.ffi import AllToAllError, FfiAllToAll, check_errors  # noqa: E402
from ltx_jax.parallel.exchange import gather_heads, lax_all_to_all, send_heads  # noqa: E402

N = num_processes
TIMEOUT_S = 2.0  # check c: short, so the missing peer is noticed quickly
SETUP_TIMEOUT_S = 60.0
SP_TIMEOUT_S = 60.0
BARRIER_MS = 120_000
SHAPES = [((2, 24 * N, 4 * N, 64), 2, 1), ((2, 24 * N, 4 * N, 64), 1, 2), ((3, 1, 19 * N, N, 128), 3, 2),
          ((3, 5 * N, N, 3), 2, 1), ((2 * N, 3, 4 * N, 8), 0, 2)]  # fmt: skip
failures = 0
barriers = iter(range(10_000))


def report(ok: bool, what: str, detail: str = "") -> None:
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} process {process_id}: {what}{'' if ok else ' -- ' + detail}", flush=True)  # noqa: T201


def check(what: str, fn) -> None:  # noqa: ANN001
    """Runs `fn` (returns (ok, detail)); an exception is a FAIL, and the processes stay in step."""
    try:
        ok, detail = fn()
    except Exception:  # noqa: BLE001 - report and go on, so every process reaches the same barriers
        ok, detail = False, traceback.format_exc()[-2000:]
    report(ok, what, detail)


def barrier() -> None:
    global_state.client.wait_at_barrier(f"ffi_worker_{next(barriers)}", BARRIER_MS)


def global_array(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def local(x: jax.Array) -> list[np.ndarray]:
    return [np.asarray(s.data) for s in sorted(x.addressable_shards, key=lambda s: s.device.id)]


def exchange_program(backend, mesh, split: int, concat: int, count: int = 3):  # noqa: ANN001, ANN201
    def body(*xs):
        return tuple(backend(x, axis_name="sp", split_axis=split, concat_axis=concat, tiled=True) for x in xs)

    in_spec, out_spec = P(*[None] * concat, "sp"), P(*[None] * split, "sp")
    f = jax.shard_map(body, mesh=mesh, in_specs=(in_spec,) * count, out_specs=(out_spec,) * count, check_vma=False)
    return jax.jit(f), NamedSharding(mesh, in_spec)


def exchanges_equal_lax(mesh, ffi: FfiAllToAll, shape, split: int, concat: int, dtype) -> tuple[bool, str]:  # noqa: ANN001
    rng = np.random.default_rng([*shape, split, jnp.dtype(dtype).itemsize])  # the same in every process
    ours, sharding = exchange_program(ffi, mesh, split, concat)
    reference, _ = exchange_program(lax_all_to_all, mesh, split, concat)
    for _ in range(2):  # two programs back to back: slots alternate across calls too
        hosts = [(rng.standard_normal(shape) * 50).astype(dtype) for _ in range(3)]
        xs = [global_array(h, sharding) for h in hosts]
        compiled = ours.lower(*xs).compile()  # both processes compile before either launches: no skew
        barrier()
        got, want = compiled(*xs), reference(*xs)
        for g, w in zip(got, want, strict=True):
            for a, b in zip(local(g), local(w), strict=True):
                if a.tobytes() != b.tobytes():
                    return False, f"max |diff| {np.abs(a.astype(np.float32) - b.astype(np.float32)).max()}"
    check_errors()
    return True, ""


def round_trips(mesh) -> tuple[bool, str]:  # noqa: ANN001
    backend = FfiAllToAll(mesh, command_buffer=True, setup_timeout_s=SETUP_TIMEOUT_S)
    trip = lambda _, x: gather_heads(send_heads(x, backend, "sp"), backend, "sp")  # noqa: E731
    spec = P(None, None, "sp")
    loop = lambda x: lax.fori_loop(0, 5, trip, x)  # noqa: E731
    f = jax.jit(jax.shard_map(loop, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    host = np.random.default_rng(1).standard_normal((3, 2, 16 * N, 8 * N, 128)).astype(jnp.bfloat16)
    x = global_array(host, NamedSharding(mesh, spec))
    f = f.lower(x).compile()
    barrier()
    same = all(a.tobytes() == b.tobytes() for a, b in zip(local(f(x)), local(x), strict=True))
    check_errors()
    return same, "the round trips changed the input"


def modality(rng: np.random.Generator, tokens: int, channels: int, context_dim: int, axes: int, dtype):  # noqa: ANN001, ANN201
    starts = np.repeat(np.arange(tokens, dtype=np.float32)[None, None] / 10, axes, axis=1)
    return ltx_jax.Modality(
        latent=rng.standard_normal((2, tokens, channels)).astype(dtype),
        sigma=np.full((2,), 0.7, np.float32),
        timesteps=np.full((2, tokens, 1), 0.7, np.float32),
        positions=np.repeat(np.stack([starts, starts + 0.1], axis=-1), 2, axis=0),
        context=rng.standard_normal((2, 32, context_dim)).astype(dtype),
    )


def sp_forward_equal(mesh, dtype) -> tuple[bool, str]:  # noqa: ANN001
    model = ltx_jax.LTXModel(SP_CFG, rngs=nnx.Rngs(0), param_dtype=dtype)
    rng = np.random.default_rng(0)
    video = modality(rng, 121, SP_CFG.in_channels, SP_CFG.cross_attention_dim, 3, dtype)
    audio = modality(rng, 13, SP_CFG.audio_in_channels, SP_CFG.audio_cross_attention_dim, 1, dtype)
    # The first exchange waits for the other process to finish compiling: a timeout that covers it.
    ffi = FfiAllToAll(mesh, timeout_s=SP_TIMEOUT_S, setup_timeout_s=SETUP_TIMEOUT_S)
    outputs = []
    with jax.default_matmul_precision("highest"):  # TF32 rounding would depend on XLA's tiling
        for backend in (ffi, "all_to_all"):
            sp = ltx_jax.parallel.SequenceParallel(model, mesh, backend=backend)
            barrier()
            outputs.append([np.asarray(o.addressable_data(0), np.float32) for o in sp(video, audio)])
    check_errors()
    diffs = [float(np.abs(a - b).max()) for a, b in zip(*outputs, strict=True)]
    return all(d == 0 for d in diffs), f"max |ffi - all_to_all| per output {diffs}"


def missing_peer(mesh) -> None:
    """Check c. Both processes create the communicator (at trace time); only process 0 runs first."""
    ffi = FfiAllToAll(mesh, timeout_s=TIMEOUT_S, setup_timeout_s=SETUP_TIMEOUT_S)
    f, sharding = exchange_program(ffi, mesh, 2, 1, count=1)
    x = global_array(np.ones((1, 8 * N, 4 * N, 32), jnp.bfloat16), sharding)
    f = f.lower(x).compile()
    barrier()
    if process_id == 0:
        start = time.perf_counter()
        (out,) = f(x)
        poisoned = all(np.all(a.view(np.uint16) == 0xFFFF) for a in local(jax.block_until_ready(out)))
        waited = time.perf_counter() - start
        report(TIMEOUT_S <= waited < TIMEOUT_S + 8, f"the missing peer is noticed after {waited:.2f} s", "")
        report(poisoned, "the timed-out output is NaN bytes", "stale or partial data")
        check("AllToAllError names rank 0 and the missing rank 1", lambda: _raises(r"rank 0 \(GPU 0\) waited 2 s"))
        check("the next exchange raises on the host", lambda: _next_call_raises(f, x))
    barrier()
    if process_id == 1:
        start = time.perf_counter()
        (out,) = f(x)
        jax.block_until_ready(out)
        waited = time.perf_counter() - start
        report(waited < TIMEOUT_S, f"rank 1 stops at once ({waited:.2f} s): the dead flag reached it", "")
        check("rank 1 reports that a peer failed", lambda: _raises(r"rank 1 \(GPU 1\) stopped: another rank"))
    barrier()


def _raises(pattern: str) -> tuple[bool, str]:
    import re

    try:
        check_errors()
    except AllToAllError as error:
        return re.search(pattern, str(error)) is not None, str(error)
    return False, "check_errors() did not raise"


def _next_call_raises(f, x) -> tuple[bool, str]:  # noqa: ANN001
    try:
        jax.block_until_ready(f(x))
    except Exception as error:  # noqa: BLE001 - jax's runtime error carries the handler's message
        return "for rank 1" in str(error), str(error)[-500:]
    return False, "a call on the failed communicator ran"


def main() -> None:
    devices = jax.local_devices()
    print(f"process {process_id}: {jax.process_count()} processes, local {devices}, global {jax.device_count()}")  # noqa: T201
    mesh = ltx_jax.parallel.make_mesh(jax.device_count())
    ffi = FfiAllToAll(mesh, setup_timeout_s=SETUP_TIMEOUT_S)
    for shape, split, concat in SHAPES:
        for dtype in (jnp.bfloat16, jnp.float32):
            name = f"a. ffi == lax.all_to_all {shape} split {split} concat {concat} {jnp.dtype(dtype).name}"
            check(name, lambda: exchanges_equal_lax(mesh, ffi, shape, split, concat, dtype))  # noqa: B023
    check("a. 5 send/gather round trips (command buffer target) return the input", lambda: round_trips(mesh))
    for dtype in (jnp.float32, jnp.bfloat16):
        name = f"b. SP DiT forward ffi == all_to_all ({jnp.dtype(dtype).name})"
        check(name, lambda: sp_forward_equal(mesh, dtype))  # noqa: B023
    missing_peer(mesh)
    print(f"{'ALL PASSED' if not failures else 'FAILED'}: process {process_id}, {failures} failure(s)", flush=True)  # noqa: T201
    barrier()
    jax.distributed.shutdown()
    # Check c deliberately failed a side-effecting call; JAX's atexit hooks would re-raise its error
    # and crash the process after every check has run and reported, so exit without them.
    os._exit(1 if failures else 0)


if __name__ == "__main__":
    main()
