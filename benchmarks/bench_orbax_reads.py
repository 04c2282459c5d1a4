"""Bytes Orbax reads from disk when a converted checkpoint is restored onto a mesh, by placement.

    python benchmarks/bench_orbax_reads.py                  # 8 simulated CPU devices, LTX-2-sized matrices
    python benchmarks/bench_orbax_reads.py --mesh 4 --dim 1024

Writes a few matrices shaped like LTX-2's (dim x dim and dim x 4*dim, bf16) the way
`convert_checkpoint` writes parameters (Orbax v1, uncompressed, one chunk per array), then restores
them as `load_checkpoint` does (`ocp.load` into `ShapeDtypeStruct`s carrying the target sharding):
replicated and FSDP-sharded (`param_sharding(..., shard_weights=True)`). Prints the bytes
tensorstore's file kvstore read (its `bytes_read` metric) against the bytes of the arrays.
"""

import argparse
import os
import tempfile

from ltx_jax.cli.devices import simulate_cpu_devices_if_needed  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mesh", type=int, default=8, help="devices (default 8)")
    parser.add_argument("--dim", type=int, default=4096, help="model width (default 4096, LTX-2's)")
    return parser.parse_args()


ARGS = parse_args()
simulate_cpu_devices_if_needed(ARGS.mesh, force_cpu=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorstore as ts  # noqa: E402
from orbax.checkpoint import v1 as ocp  # noqa: E402

from ltx_jax.parallel import make_mesh  # noqa: E402
from ltx_jax.parallel.sharding import param_sharding  # noqa: E402

BYTES_READ = "/tensorstore/kvstore/file/bytes_read"


def bytes_read() -> int:
    return sum(m["values"][0]["value"] for m in ts.experimental_collect_matching_metrics(BYTES_READ))


def main(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    shapes = {"to_q": (args.dim, args.dim), "ff_in": (4 * args.dim, args.dim), "ff_out": (args.dim, 4 * args.dim)}
    arrays = {k: rng.standard_normal(s, np.float32).astype(jnp.bfloat16) for k, s in shapes.items()}
    total = sum(a.nbytes for a in arrays.values())
    mesh = make_mesh(args.mesh)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "params")
        context = ocp.Context()
        context.array.saving.use_compression = False  # as convert_checkpoint writes
        with context:
            ocp.save_pytree(path, arrays)
        print(f"{len(arrays)} arrays, {total / 2**20:.0f} MiB, restored onto {args.mesh} CPU devices:")
        for name, shard_weights in (("replicated", False), ("sharded (FSDP)", True)):
            abstract = {
                k: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=param_sharding(a.shape, mesh, shard_weights))
                for k, a in arrays.items()
            }
            before = bytes_read()
            restored = ocp.load_pytree(path, abstract)
            jax.block_until_ready(restored)
            read = bytes_read() - before
            assert all(np.array_equal(np.asarray(restored[k]), arrays[k]) for k in arrays)
            print(f"  {name:>15}: {read / 2**20:8.1f} MiB read, {read / total:.2f}x the arrays")


if __name__ == "__main__":
    main(ARGS)
