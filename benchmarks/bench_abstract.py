"""What a DiT load costs before it reads a tensor and after it placed the last: the abstract model, its
checkpoint-key table, and setting its parameters, for the 48-block LTX-2.3 DiT (no weights: host work only).

    python benchmarks/bench_abstract.py [--repeats 5]
    PYTHONPATH=OTHER_TREE python benchmarks/bench_abstract.py   # another tree's ltx_jax, for a ratio

Each of `load_checkpoint`'s fixed steps, median of `--repeats` after one unmeasured round:
    abstract      `LTXModel.abstract(cfg, bfloat16)`
    table         `expected_keys(model)` (the `.safetensors` path; a converted directory walks the same)
    set_params    `set_params(model, values)` with every value a `jax.ShapeDtypeStruct`
"""

import argparse
import statistics

import jax
import jax.numpy as jnp
from bench_load_parts import timed  # beside this script

import ltx_jax
from ltx_jax.config import LTXConfig
from ltx_jax.convert.state_dict import expected_keys, set_params
from ltx_jax.model.model import LTXModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cfg = LTXConfig.ltx2_3()
    model = LTXModel.abstract(cfg, jnp.bfloat16)
    table = expected_keys(model)
    values = {  # the table's shapes are torch's: a Linear's kernel is stored transposed
        path: jax.ShapeDtypeStruct(tuple(reversed(shape)) if transposed else shape, dtype)
        for path, transposed, shape, dtype in table.values()
    }
    steps = {
        "abstract": lambda: LTXModel.abstract(cfg, jnp.bfloat16),
        "table": lambda: expected_keys(model),
        "set_params": lambda: set_params(model, values),
    }
    print(f"ltx_jax from {ltx_jax.__file__}; jax {jax.__version__}; {len(table)} parameters", flush=True)
    for name, work in steps.items():
        work()
        seconds = [timed(work) for _ in range(args.repeats)]
        runs = ", ".join(f"{s:.3f}" for s in seconds)
        print(f"{name:>10}: {statistics.median(seconds):.3f} s (runs: {runs})", flush=True)


if __name__ == "__main__":
    main()
