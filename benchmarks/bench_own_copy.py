"""How long building a `SequenceParallel` takes (its copy of the DiT's graph and state), CPU or GPU.

    python scripts/make_synthetic_checkpoint.py /tmp/tinysynth --tiny
    python benchmarks/bench_own_copy.py /tmp/tinysynth/ltx-2.3-22b-dev.safetensors [--repeats 3] [--profile]

48 blocks at tiny widths: the cost is Python walking the module graph, not the weights' size.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from flax import nnx

from ltx_jax import load_checkpoint
from ltx_jax.parallel import make_mesh
from ltx_jax.parallel.sequence_parallel import SequenceParallel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also print cProfile's 25 costliest calls")
    args = parser.parse_args()
    model, _ = load_checkpoint(args.checkpoint, progress=False)
    params = len(nnx.to_flat_state(nnx.state(model)))
    print(f"{len(model.transformer_blocks)} blocks, {params} parameters")
    mesh = make_mesh(1)
    for _ in range(args.repeats):
        start = time.perf_counter()
        SequenceParallel(model, mesh)
        print(f"SequenceParallel built in {time.perf_counter() - start:.2f} s")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(SequenceParallel, model, mesh)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
