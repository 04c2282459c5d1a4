"""Loading an LTX-2 DiT from a `.safetensors` file onto one GPU: ltx-jax against ltx-core, each in a fresh
process, the page cache warm (every file is read once before the first timed load).

    python scripts/make_synthetic_checkpoint.py /tmp/synth --layers 12 --gemma-layers 1
    python benchmarks/bench_load.py /tmp/synth/ltx-2.3-22b-dev.safetensors [--trees .trees/base .] [--repeats 2] \
        [--load-threads 8 16 32] [--lora /tmp/synth/ltx-2.3-22b-distilled-lora-384.safetensors]

`--trees` names directories that each hold an `ltx_jax` package (e.g. `git archive REV ltx_jax`), timed
one after another in the same run: a loader before and after a change. Each line: seconds and GB/s of
the DiT's bytes (the file's other components are not loaded by either). `--lora` adds rows for ltx-jax's
`load_lora` of that file (its factors, unfused, for the checkpoint's DiT), per tree, after the DiT's.
"""

import argparse
import os
import subprocess
import sys
import time

JAX_CHILD = """
import sys, time
import jax, jax.numpy as jnp
from flax import nnx
import ltx_jax
from ltx_jax.convert import placement
if sys.argv[2] != "default":  # else the tree's own
    placement.LOAD_THREADS = int(sys.argv[2])
start = time.perf_counter()
model, cfg = ltx_jax.load_checkpoint(sys.argv[1], dtype=jnp.bfloat16)
leaves = jax.block_until_ready(jax.tree.leaves(nnx.state(model)))
seconds = time.perf_counter() - start
print("RESULT", seconds, sum(x.nbytes for x in leaves))
"""

LORA_CHILD = """
import sys, time
import jax
from flax import nnx
import ltx_jax
from ltx_jax.convert.dit_tensors import Lora, checkpoint_config
from ltx_jax.convert.lora import load_lora
from ltx_jax.convert.safetensors_file import SafetensorsFile
cfg, _ = checkpoint_config(SafetensorsFile(sys.argv[1]), None)
model = nnx.eval_shape(lambda: ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0)))
start = time.perf_counter()
factors = jax.block_until_ready(jax.tree.leaves(load_lora(model, Lora(sys.argv[3], 1.0)).factors))
print("RESULT", time.perf_counter() - start, sum(x.nbytes for x in factors))
"""

TORCH_CHILD = """
import sys, time
import torch
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator
start = time.perf_counter()
model = SingleGPUModelBuilder(LTXModelConfigurator, sys.argv[1], LTXV_MODEL_COMFY_RENAMING_MAP).build(
    device=torch.device("cuda"), dtype=torch.bfloat16)
torch.cuda.synchronize()
seconds = time.perf_counter() - start
print("RESULT", seconds, sum(p.numel() * p.element_size() for p in model.state_dict().values()))
"""


def timed(code: str, path: str, pythonpath: str | None, threads: str, *extra: str) -> tuple[float, int]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH", "")]))
    # `python -c` puts its working directory first on sys.path: run in the tree, so its ltx_jax is the one imported
    result = subprocess.run(
        [sys.executable, "-c", code, os.path.abspath(path), str(threads), *extra],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=pythonpath,
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT")), None)
    if line is None:
        raise RuntimeError(f"the loader failed:\n{result.stderr[-3000:]}")
    _, seconds, size = line.split()
    return float(seconds), int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--trees", nargs="*", default=["."], help="directories holding an ltx_jax package")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-torch", action="store_true", help="skip ltx-core")
    parser.add_argument(
        "--load-threads",
        nargs="*",
        default=["default"],
        help="ltx-jax's tensors in flight, one row each (default: the tree's own placement.LOAD_THREADS)",
    )
    parser.add_argument("--lora", help="a LoRA .safetensors for the checkpoint's DiT: time load_lora too")
    args = parser.parse_args()
    for path in filter(None, [args.checkpoint, args.lora]):
        start = time.perf_counter()
        with open(path, "rb") as f:  # warm the page cache
            while f.read(1 << 26):
                pass
        print(f"read {os.path.getsize(path) / 1e9:.1f} GB once in {time.perf_counter() - start:.1f} s")
    rows = [] if args.no_torch else [("ltx-core SingleGPUModelBuilder", TORCH_CHILD, None, "default")]
    for tree in args.trees:
        for threads in args.load_threads:
            rows.append(
                (f"ltx-jax load_checkpoint ({tree}, {threads} in flight)", JAX_CHILD, os.path.abspath(tree), threads)
            )
    if args.lora:
        lora = os.path.abspath(args.lora)
        rows += [
            (f"ltx-jax load_lora ({tree})", LORA_CHILD, os.path.abspath(tree), "default", lora) for tree in args.trees
        ]
    for label, code, pythonpath, threads, *extra in rows:
        for _ in range(args.repeats):
            seconds, size = timed(code, args.checkpoint, pythonpath, threads, *extra)
            print(f"{label}: {seconds:.1f} s, {size / 1e9:.2f} GB, {size / 1e9 / seconds:.2f} GB/s")


if __name__ == "__main__":
    main()
