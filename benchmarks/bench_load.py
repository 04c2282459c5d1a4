"""Loading an LTX-2 DiT from a `.safetensors` file onto one GPU: ltx-jax against ltx-core, each in a fresh
process, the page cache warm (every file is read once before the first timed load).

    python scripts/make_synthetic_checkpoint.py /tmp/synth --layers 12 --gemma-layers 1
    python benchmarks/bench_load.py /tmp/synth/ltx-2.3-22b-dev.safetensors [--trees .trees/base .] [--repeats 2] \
        [--load-threads 8 16 32] [--lora /tmp/synth/ltx-2.3-22b-distilled-lora-384.safetensors]

The checkpoint may also be a directory written by `convert_checkpoint` (with `--no-torch`: ltx-core reads
`.safetensors` only). `--trees` names directories that each hold an `ltx_jax` package (e.g. `git archive
REV ltx_jax`), timed one after another in the same run: a loader before and after a change. Each line:
seconds and GB/s of the DiT's bytes (the file's other components are not loaded by either); ltx-jax's lines
add their peak memory (the device's; the process's resident set on the CPU backend) and, within that time,
the backend's start, compiling (summed over threads: the device transposes'
programs), `place_table` (reading and placing a `.safetensors` file's tensors) and `set_params`; the rest
is the abstract model and its key table (and a converted directory's restore). `--lora` adds rows for
ltx-jax's `load_lora` of that file (its factors, unfused, for the checkpoint's DiT), per tree, after the
DiT's. `--quantization` loads ltx-jax's rows with `quantization=` that (GB is then what the quantized model
holds; ltx-core's row stays bf16).
"""

import argparse
import json
import os
import subprocess
import sys
import time

JAX_CHILD = """
import json, sys, time
import jax, jax.numpy as jnp
from flax import nnx
import ltx_jax
import ltx_jax.convert.checkpoint as checkpoint
from ltx_jax.convert import placement
if sys.argv[2] != "default":  # else the tree's own
    placement.LOAD_THREADS = int(sys.argv[2])
phases = {"compiling": 0.0}
def timed(name, function):
    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - start
    return call
for name in ("place_table", "set_params"):  # the loader's steps, where this tree's loader has them
    if hasattr(checkpoint, name):
        setattr(checkpoint, name, timed(name, getattr(checkpoint, name)))
def compiled(event, seconds, **_):
    if event == "/jax/core/compile/backend_compile_duration":
        phases["compiling"] += seconds
jax.monitoring.register_event_duration_secs_listener(compiled)
start = time.perf_counter()
jax.devices()  # the backend's start (CUDA context, memory pool), timed within the load as torch's is
phases["backend start"] = time.perf_counter() - start
options = {} if sys.argv[3] == "none" else {"quantization": sys.argv[3]}  # trees from before the option
model, cfg = ltx_jax.load_checkpoint(sys.argv[1], dtype=jnp.bfloat16, **options)
leaves = jax.block_until_ready(jax.tree.leaves(nnx.state(model)))
seconds = time.perf_counter() - start
print("RESULT", seconds, sum(x.nbytes for x in leaves))
print("PHASES", json.dumps(phases))
stats = jax.devices()[0].memory_stats()
if stats and "peak_bytes_in_use" in stats:
    print("PEAK", stats["peak_bytes_in_use"], "device")
else:  # the CPU backend keeps arrays in the process's memory
    import resource
    print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "RSS")
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


def timed(code: str, path: str, pythonpath: str | None, threads: str, *extra: str) -> tuple[float, int, dict, str]:
    """The child `code`'s seconds and bytes loaded, the seconds of the phases it reports (ltx-jax's), and
    its peak memory where it reports one."""
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
    lines = {x.split(" ", 1)[0]: x.split(" ", 1)[1] for x in result.stdout.splitlines() if " " in x}
    if "RESULT" not in lines:
        raise RuntimeError(f"the loader failed:\n{result.stderr[-3000:]}")
    seconds, size = lines["RESULT"].split()
    peak = ""
    if "PEAK" in lines:
        value, kind = lines["PEAK"].split()
        peak = f", peak {kind} {int(value) / 2**30:.2f} GiB"
    return float(seconds), int(size), json.loads(lines.get("PHASES", "{}")), peak


def warm_page_cache(path: str) -> None:
    """Reads `path` (a file, or every file under a converted directory) once."""
    files = [os.path.join(d, n) for d, _, names in os.walk(path) for n in names] if os.path.isdir(path) else [path]
    start = time.perf_counter()
    for name in files:
        with open(name, "rb") as f:
            while f.read(1 << 26):
                pass
    size = sum(os.path.getsize(name) for name in files)
    print(f"read {size / 1e9:.1f} GB once in {time.perf_counter() - start:.1f} s")


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
    parser.add_argument(
        "--quantization", default="none", choices=["none", "fp8-cast", "fp8"], help="ltx-jax's rows (ltx-core: bf16)"
    )
    args = parser.parse_args()
    if os.path.isdir(args.checkpoint) and not args.no_torch:
        parser.error(f"{args.checkpoint} is a converted directory: ltx-core loads .safetensors only; add --no-torch.")
    for path in filter(None, [args.checkpoint, args.lora]):
        warm_page_cache(path)
    rows = [] if args.no_torch else [("ltx-core SingleGPUModelBuilder", TORCH_CHILD, None, "default")]
    for tree in args.trees:
        for threads in args.load_threads:
            rows.append(
                (
                    f"ltx-jax load_checkpoint ({tree}, {threads} in flight, {args.quantization})",
                    JAX_CHILD,
                    os.path.abspath(tree),
                    threads,
                    args.quantization,
                )
            )
    if args.lora:
        lora = os.path.abspath(args.lora)
        rows += [
            (f"ltx-jax load_lora ({tree})", LORA_CHILD, os.path.abspath(tree), "default", lora) for tree in args.trees
        ]
    for label, code, pythonpath, threads, *extra in rows:
        for _ in range(args.repeats):
            seconds, size, phases, peak = timed(code, args.checkpoint, pythonpath, threads, *extra)
            within = ", ".join(f"{name} {value:.1f} s" for name, value in phases.items())
            print(
                f"{label}: {seconds:.1f} s, {size / 1e9:.2f} GB, {size / 1e9 / seconds:.2f} GB/s{peak}"
                + (within and f" ({within})")
            )


if __name__ == "__main__":
    main()
