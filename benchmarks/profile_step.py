"""Where one DiT forward spends its GPU time: ltx-jax (jax.profiler) beside ltx-core (torch.profiler).

    python benchmarks/profile_step.py --out results/profile          # 8 blocks, 6144 and 24576 tokens
    python benchmarks/profile_step.py --no-torch --xla-defaults      # ltx-jax only, e.g. under XLA_FLAGS
    python benchmarks/profile_step.py --torch-compile --per-sample   # also ltx-core under torch.compile, and
                                                                     # ltx-jax with one timestep per sample

Same model, weights and inputs as `bench_step.py` (which this imports). For each token count it
prints the median forward time (timed before profiling), then the GPU kernel time per forward split
into attention, matrix products, copies/transposes and the rest (elementwise and reductions), and
the largest kernels (torch's with the aten op that launched them and its input shapes; XLA names its
kernels after the fusions of the optimized HLO written to `--out`). Kernel time below the forward time is
time the GPU sat idle (launch gaps, host work); for ltx-jax it also prints the gaps between kernels.
Writes each trace's per-kernel totals to `OUT/profile_T.json`. Needs a CUDA GPU.
"""

import argparse
import collections
import gzip
import json
import pathlib
import sys
import tempfile
from collections.abc import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_step  # noqa: E402  (sets XLA_PYTHON_CLIENT_PREALLOCATE before jax starts)
import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402

import ltx_jax  # noqa: E402

PROFILED_FORWARDS = 3
# First match wins; attention before matmul because attention kernels also use the matrix units.
CATEGORIES = (
    ("attention", ("fmha", "flash", "sdpa", "attention")),
    ("matmul", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "matmul", "dot", "wgmma")),
    ("copy/transpose", ("transpose", "copy", "memcpy", "memset", "concatenate")),
)


def category(kernel: str) -> str:
    name = kernel.lower()
    return next((cat for cat, keys in CATEGORIES if any(k in name for k in keys)), "elementwise/reduce")


def jax_kernels(trace_dir: pathlib.Path) -> dict[str, list]:
    """Kernel name -> [total microseconds, launches, ""] on the GPU streams of a jax.profiler trace."""
    (path,) = trace_dir.glob("plugins/profile/*/*.trace.json.gz")
    events = json.load(gzip.open(path))["traceEvents"]
    gpu_pids = {e["pid"] for e in events if e.get("name") == "process_name" and "GPU" in e["args"]["name"]}
    streams = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("name") == "thread_name" and e["pid"] in gpu_pids and e["args"]["name"].startswith("Stream")
    }
    kernels = [e for e in events if e.get("ph") == "X" and (e["pid"], e.get("tid")) in streams]
    print_gaps(kernels)
    # no launcher: XLA names its kernels after their HLO fusions, and under command buffers the trace's
    # `hlo_op` is the buffer's name for every kernel
    return _totals(kernels, lambda e: "")


def print_gaps(kernels: list[dict], largest: int = 6) -> None:
    """Where the GPU idles inside the traced forwards: the sum of the gaps between consecutive kernels (all
    streams merged) under 1 ms, and the largest gaps with the kernels on either side. Gaps of 1 ms or more are
    the host waiting between forwards (`block_until_ready`), not part of one."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), e["name"]) for e in kernels)
    gaps, end, before = [], None, ""
    for start, stop, name in spans:
        if end is not None and start > end:
            gaps.append((start - end, before[:50], name[:50]))
        if end is None or stop > end:
            end, before = stop, name
    inside = [g for g in gaps if g[0] < 1000.0]
    total, count = sum(g[0] for g in inside) / 1e3 / PROFILED_FORWARDS, len(inside) // PROFILED_FORWARDS
    print(f"idle between kernels inside a forward: {total:.2f} ms per forward ({count} gaps)")
    for gap, after, name in sorted(inside, reverse=True)[:largest]:
        print(f"  {gap:8.1f} us after {after} before {name}")


def torch_kernels(trace_path: pathlib.Path) -> dict[str, list]:
    """Kernel name -> [total microseconds, launches, launching op and its input shapes] from a
    torch.profiler Chrome trace recorded with `record_shapes`."""
    events = json.loads(trace_path.read_text())["traceEvents"]
    ops = {
        e["args"]["External id"]: f"{e['name']} {e['args'].get('Input Dims', '')}"
        for e in events
        if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
    }
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return _totals(kernels, lambda e: ops.get(e.get("args", {}).get("External id"), ""))


def _totals(events: list[dict], launcher: Callable[[dict], str]) -> dict[str, list]:
    totals: dict[str, list] = {}
    for event in events:
        total = totals.setdefault(event["name"], [0.0, 0, collections.Counter()])
        total[0] += float(event.get("dur", 0.0))
        total[1] += 1
        total[2][launcher(event)[:160]] += 1
    # the launchers of a kernel, most frequent first (one kernel serves several GEMM shapes)
    return {
        name: [us, n, "; ".join(f"{k} x{c}" for k, c in who.most_common(3))] for name, (us, n, who) in totals.items()
    }


def summary(kernels: dict[str, list]) -> dict[str, float]:
    """Milliseconds per forward by category, plus the kernel count per forward."""
    ms: dict[str, float] = collections.defaultdict(float)
    for name, (us, _, _) in kernels.items():
        ms[category(name)] += us / 1e3 / PROFILED_FORWARDS
    ms["all kernels"] = sum(ms.values())
    ms["launches"] = sum(count for _, count, _ in kernels.values()) / PROFILED_FORWARDS
    return dict(ms)


def profile_jax(
    model: ltx_jax.LTXModel,
    data: dict,
    workdir: pathlib.Path,
    hlo_path: pathlib.Path | None,
    compiler_options: dict[str, bool],
) -> tuple[float, dict]:
    """Median forward seconds and the kernels of a trace; writes the optimized HLO to `hlo_path`."""
    graphdef, state = nnx.split(model)
    forward = jax.jit(lambda s, v, a: nnx.merge(graphdef, s)(v, a), compiler_options=compiler_options)
    video, audio = (bench_step.jax_modality(data[k]) for k in ("video", "audio"))
    compiled = forward.lower(state, video, audio).compile()
    if hlo_path is not None:  # kernel names are the HLO's fusion names: this maps them to the model
        hlo_path.parent.mkdir(parents=True, exist_ok=True)
        hlo_path.write_text(compiled.as_text())
    _, seconds = bench_step.median_seconds(lambda: compiled(state, video, audio), jax.block_until_ready, 10)
    with jax.profiler.trace(str(workdir)):
        for _ in range(PROFILED_FORWARDS):
            jax.block_until_ready(compiled(state, video, audio))
    return seconds, jax_kernels(workdir)


def profile_torch(reference: torch.nn.Module, data: dict, trace: pathlib.Path, device: str) -> tuple[float, dict]:
    """Median forward seconds and the kernels of a trace; `reference` may be compiled (the warm-up compiles)."""
    video, audio = (bench_step.torch_modality(data[k], device) for k in ("video", "audio"))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    perturbations = bench_step.torch_perturbations(False)
    with torch.inference_mode():
        run = lambda: reference(video, audio, perturbations)  # noqa: E731
        _, seconds = bench_step.median_seconds(run, lambda _: sync(), 10)
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(PROFILED_FORWARDS):
                run()
            sync()
    prof.export_chrome_trace(str(trace))
    return seconds, torch_kernels(trace)


def report(tokens: int, rows: dict[str, tuple[float, dict]], top: int) -> None:
    names = list(rows)
    print(f"\n== {tokens} video tokens: ms per forward ==")
    print(f"{'':>20}" + "".join(f"{n:>20}" for n in names))
    print(f"{'forward (timed)':>20}" + "".join(f"{rows[n][0] * 1e3:>20.1f}" for n in names))
    sums = {n: summary(rows[n][1]) for n in names}
    for key in [c for c, _ in CATEGORIES] + ["elementwise/reduce", "all kernels", "launches"]:
        print(f"{key:>20}" + "".join(f"{sums[n].get(key, 0.0):>20.1f}" for n in names))
    for n in names:
        print(f"-- {n}: largest kernels, ms per forward (launches), what launched them --")
        ranked = sorted(rows[n][1].items(), key=lambda kv: -kv[1][0])[:top]
        for name, (us, count, launcher) in ranked:
            per_forward = us / 1e3 / PROFILED_FORWARDS
            print(f"{per_forward:>8.2f} ({count // PROFILED_FORWARDS:>4}) {category(name):<18} {name[:100]}")
            if launcher:
                print(f"{'':>16}{launcher[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--no-torch", action="store_true", help="profile ltx-jax only")
    parser.add_argument("--torch-compile", action="store_true", help="also profile ltx-core under torch.compile")
    parser.add_argument("--per-sample", action="store_true", help="also profile ltx-jax with one timestep per sample")
    parser.add_argument(
        "--xla-defaults",
        action="store_true",
        help="compile without DIT_COMPILER_OPTIONS, which take precedence over XLA_FLAGS",
    )
    parser.add_argument("--top", type=int, default=15, help="how many of the largest kernels to list")
    parser.add_argument(
        "--out", type=pathlib.Path, default=None, help="folder for profile_T.json and the optimized HLO"
    )
    parser.add_argument("--device", default="cuda", help="torch device (cpu only to check the script)")
    args = parser.parse_args()
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers, av_ca_scale_shift_from_sigma=True)
    reference = bench_step.torch_reference(cfg, args.device)
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jax.numpy.bfloat16), reference.state_dict())
    if args.no_torch and not args.torch_compile:
        reference = None  # its GPU memory back for the jax-only profile
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; {args.layers} blocks")
    data = {tokens: bench_step.inputs(tokens, np.random.default_rng(tokens)) for tokens in args.tokens}
    rows: dict[int, dict[str, tuple[float, dict]]] = {tokens: {} for tokens in args.tokens}
    with tempfile.TemporaryDirectory() as tmp:
        # All jax traces before any torch one: torch's profiler keeps CUPTI subscribed after it
        # stops, and a later jax trace then fails (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
        for tokens in args.tokens:
            rows[tokens] |= profile_jax_rows(model, data[tokens], pathlib.Path(tmp), args)
        for tokens in args.tokens:
            rows[tokens] |= profile_torch_rows(reference, data[tokens], pathlib.Path(tmp), args)
    for tokens in args.tokens:
        report(tokens, rows[tokens], args.top)
        if args.out is not None:
            dump = {n: {"seconds": s, "kernels_us": k} for n, (s, k) in rows[tokens].items()}
            (args.out / f"profile_{tokens}.json").write_text(json.dumps(dump, indent=1))


def profile_jax_rows(
    model: ltx_jax.LTXModel, data: dict, tmp: pathlib.Path, args: argparse.Namespace
) -> dict[str, tuple[float, dict]]:
    """ltx-jax with the inputs as given (one timestep per token) and, with `--per-sample`, one per sample."""
    tokens = data["video"]["latent"].shape[1]
    inputs = {"ltx-jax": data} | ({"ltx-jax per sample": bench_step.per_sample(data)} if args.per_sample else {})
    options = {} if args.xla_defaults else ltx_jax.DIT_COMPILER_OPTIONS
    rows = {}
    for name, fields in inputs.items():
        slug = f"{name.replace(' ', '_')}_{tokens}"
        hlo = None if args.out is None else args.out / f"{slug}.hlo.txt"
        print(f"-- {name}, {tokens} video tokens")
        rows[name] = profile_jax(model, fields, tmp / slug, hlo, options)
    return rows


def profile_torch_rows(
    reference: torch.nn.Module | None, data: dict, tmp: pathlib.Path, args: argparse.Namespace
) -> dict[str, tuple[float, dict]]:
    """ltx-core eager and, with `--torch-compile`, under torch.compile (default mode)."""
    modules = {} if args.no_torch else {"ltx-core": reference}
    if args.torch_compile:
        modules["torch.compile"] = bench_step.torch_compiled(reference, args.layers, len(args.tokens))
    tokens = data["video"]["latent"].shape[1]
    return {
        name: profile_torch(module, data, tmp / f"{name}_{tokens}.json", args.device)
        for name, module in modules.items()
    }


if __name__ == "__main__":
    main()
