"""Head-exchange bandwidth per GPU: the ffi peer-to-peer kernel against lax.all_to_all.

    python -m ltx_jax.ffi.build && python benchmarks/bench_all2all.py            # every GPU of the node
    python benchmarks/bench_all2all.py --devices 2 --tokens 6144 --backends ffi nccl

Backends, each in its own process (XLA flags are fixed at start-up):
  ffi          ltx_jax.ffi's CUDA peer-to-peer all-to-all
  nccl         jax.lax.all_to_all (NCCL)
  nccl_memcpy  jax.lax.all_to_all with --xla_gpu_use_memcpy_local_p2p=true (copy engines)
One timed program runs `--exchanges` send_heads/gather_heads pairs in a fori_loop at LTX-2 shapes
((B, T/n, H, D) bf16 per GPU, H=32, D=128); time per exchange = median program time / exchanges.
GB/s per GPU = the bytes each GPU holds / time (the (n-1)/n of them that cross NVLink are "bus").
"""

import argparse
import json
import os
import subprocess
import sys
import time

BACKENDS = ("ffi", "nccl", "nccl_memcpy")
MEMCPY_FLAG = "--xla_gpu_use_memcpy_local_p2p=true"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=0, help="GPUs on the mesh (default: all)")
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576], help="video tokens T")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--exchanges", type=int, default=20, help="send+gather pairs per timed program")
    parser.add_argument("--repeats", type=int, default=10, help="timed programs after warm-up")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--ffi-blocks", type=int, default=0, help="ffi send-kernel blocks (default: one per SM)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    return parser.parse_args()


def measure(args: argparse.Namespace) -> list[dict]:
    """Runs in the child process: one backend, every token count."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import ltx_jax
    import ltx_jax.ffi
    from ltx_jax.parallel.exchange import exchange_backend, gather_heads, send_heads

    n = args.devices or jax.device_count()
    mesh = ltx_jax.parallel.make_mesh(n)
    if args.child == "ffi":
        exchange = ltx_jax.ffi.FfiAllToAll(mesh, blocks=args.ffi_blocks)
    else:
        exchange = exchange_backend("all_to_all", mesh)

    def pairs(x: jax.Array) -> jax.Array:
        body = lambda _, x: gather_heads(send_heads(x, exchange, "sp"), exchange, "sp")  # noqa: E731
        return lax.fori_loop(0, args.exchanges, body, x)

    spec = P(None, "sp")
    program = jax.jit(jax.shard_map(pairs, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    rows = []
    for tokens in args.tokens:
        shape = (args.batch, tokens, args.heads, args.head_dim)
        x = jax.device_put(jax.random.normal(jax.random.key(0), shape, jnp.bfloat16), NamedSharding(mesh, spec))
        program(x).block_until_ready()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            program(x).block_until_ready()
            times.append(time.perf_counter() - start)
        seconds = sorted(times)[len(times) // 2] / (2 * args.exchanges)
        per_gpu = x.size * x.dtype.itemsize / n
        rows.append(
            {
                "backend": args.child if args.child != "ffi" or not args.ffi_blocks else f"ffi/{args.ffi_blocks}",
                "devices": n,
                "tokens": tokens,
                "us": seconds * 1e6,
                "gb_s_per_gpu": per_gpu / seconds / 1e9,
                "bus_gb_s_per_gpu": per_gpu * (n - 1) / n / seconds / 1e9,
            }
        )
    if args.child == "ffi":
        ltx_jax.ffi.check_errors()
    return rows


def run_child(backend: str, argv: list[str]) -> list[dict]:
    env = dict(os.environ)
    if backend == "nccl_memcpy":
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {MEMCPY_FLAG}".strip()
    result = subprocess.run(
        [sys.executable, __file__, *argv, "--child", backend], env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        print(f"{backend}: failed (exit {result.returncode})\n{result.stderr[-3000:]}")
        return []
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    argv = [a for a in sys.argv[1:] if a not in args.backends and a != "--backends"]
    rows = [row for backend in args.backends for row in run_child(backend, argv)]
    print(f"{'backend':<12} {'GPUs':>4} {'T':>6} {'us/exchange':>12} {'GB/s/GPU':>9} {'bus GB/s':>9}")
    for r in rows:
        print(
            f"{r['backend']:<12} {r['devices']:>4} {r['tokens']:>6} {r['us']:>12.1f} "
            f"{r['gb_s_per_gpu']:>9.1f} {r['bus_gb_s_per_gpu']:>9.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
