"""fp8-cast and fp8 against bf16, ltx-jax and ltx-core side by side: speed, memory, quality (issue #24).

    python benchmarks/bench_fp8_cast.py --layers 8 --tokens 6144 24576 --repeats 10 --steps 10 --torch-compile

LTX-2.3 width, random weights (bench_step.py's model and inputs), bf16, one GPU, all rows from the same
weights. ltx-core: eager bf16, bf16 under `torch.compile` (`--torch-compile`; compiled in the warm-up
runs), and its fp8-cast (`QuantizationPolicy.fp8_cast()`'s pieces, `TRANSFORMER_LINEAR_DOWNCAST_MAP` and
`UPCAST_DURING_INFERENCE`). Its fp8_scaled_mm needs TensorRT-LLM, absent here, so it has no row. ltx-jax:
bf16, fp8-cast (`quantize_fp8_cast`), "fp8 matmuls" (`quantize_fp8(..., attention=False)`: blocks 1.. of
the `--layers`, block 0 stays as fp8_scaled_mm keeps it), "fp8" (`quantize_fp8`: also the video
self-attention of those blocks in fp8, `ltx_jax.model.fp8_attention`) and "fp8 static" (the same with
static input scales, as an fp8 checkpoint's `input_scale` gives them: `calibrate_input_scales` over a
`--steps` Euler loop at the smallest token count from other noise than every timed and quality run).
`--jax-only` drops the ltx-core rows (its bf16 model still supplies the weights). Per token count and row: the median
forward time and its ratio to ltx-jax bf16; peak device memory (torch's allocator peak over the timed
runs; for ltx-jax XLA's plan of the program: parameters, inputs, outputs and temporaries); the video
velocity against the same side's bf16 (max |diff| / max |bf16|, mean |diff| / mean |bf16|); how many
fp8 GEMMs and fp8 attention calls the fp8 program makes. Then, after a `--steps` Euler denoising loop
from the same noise (a constant context, sigma 1 -> 0), the relative L2 of each quantized mode's final
latents against its side's bf16 ones.
"""

import argparse
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_step  # noqa: E402 - beside this script; it sets the allocator up before importing jax
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402
from ltx_core.quantization.fp8_cast import TRANSFORMER_LINEAR_DOWNCAST_MAP, UPCAST_DURING_INFERENCE  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.convert.state_dict import expected_keys  # noqa: E402
from ltx_jax.model.quantization import calibrate_input_scales, quantize_fp8, quantize_fp8_cast  # noqa: E402

Forward = Callable[[dict[str, dict[str, np.ndarray]]], np.ndarray]  # inputs -> video velocity (float32)


def torch_fp8_cast(model: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for key, param in model.named_parameters():
            (result,) = TRANSFORMER_LINEAR_DOWNCAST_MAP.apply_to_key_value(key, param.data)
            param.data = result.new_value
    return UPCAST_DURING_INFERENCE.mutator(model)


def torch_forward(model: torch.nn.Module, device: str) -> tuple[Forward, Callable[[dict], object]]:
    def run(data: dict) -> object:
        video, audio = (bench_step.torch_modality(data[k], device) for k in ("video", "audio"))
        with torch.inference_mode():
            return model(video, audio, bench_step.torch_perturbations(False))

    return (lambda data: run(data)[0].float().cpu().numpy()), run


def jax_forward(model: ltx_jax.LTXModel) -> tuple[Forward, Callable[[dict], object]]:
    compiled = bench_step.jax_forward(model, False, bench_step.COMPILER_OPTIONS)

    def run(data: dict) -> object:
        return compiled(*(bench_step.jax_modality(data[k]) for k in ("video", "audio")))

    return (lambda data: np.asarray(run(data)[0], np.float32)), run


def compiled_forward(model: ltx_jax.LTXModel, data: dict) -> jax.stages.Compiled:
    """The forward compiled as `jax_forward` times it (for its program text and memory plan)."""
    graphdef, state = nnx.split(model)
    perturbations = bench_step.jax_perturbations(False)
    video, audio = (bench_step.jax_modality(data[k]) for k in ("video", "audio"))
    forward = jax.jit(
        lambda s, v, a: nnx.merge(graphdef, s)(v, a, perturbations), compiler_options=bench_step.COMPILER_OPTIONS
    )
    return forward.lower(state, video, audio).compile()


def fp8_kernels(compiled: jax.stages.Compiled) -> tuple[int, int]:
    """How many GEMMs of the program run as cuBLASLt's fp8 GEMM, and how many attention calls as cuDNN's
    fp8 attention. Counted by custom-call target: the compiled HLO's text names a call's operands without
    their types (counting lines that also said f8e4m3fn found none, 2026-12-02 to 12-05)."""
    text = compiled.as_text()
    return text.count('custom_call_target="__cublas$lt$matmul$f8"'), text.count(
        'custom_call_target="__cudnn$fmhaSoftmaxF8"'
    )


def jax_peak_bytes(compiled: jax.stages.Compiled) -> int:
    """XLA's plan for the program: its arguments (parameters, inputs), outputs and temporaries."""
    memory = compiled.memory_analysis()
    return memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes


def parameter_bytes(model: object) -> int:
    if isinstance(model, torch.nn.Module):
        return sum(p.numel() * p.element_size() for p in model.parameters())
    return sum(x.nbytes for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def euler_loop(forward: Forward, data: dict, steps: int) -> np.ndarray:
    """x0 = x - sigma * v stepped from sigma 1 to 0 on the video stream (audio held at the inputs)."""
    sigmas = np.linspace(1.0, 0.0, steps + 1, dtype=np.float32)
    latent = data["video"]["latent"]
    for sigma, following in zip(sigmas[:-1], sigmas[1:], strict=True):
        video = {**data["video"], "latent": latent, "sigma": np.full((1,), sigma, np.float32)}
        video["timesteps"] = np.full(data["video"]["timesteps"].shape, sigma, np.float32)
        step = {**data, "video": video}
        velocity = forward(step)
        latent = (latent + (following - sigma) * velocity).astype(np.float32)
    return latent


def relative(diff: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    return float(np.abs(diff).max() / np.abs(base).max()), float(np.abs(diff).mean() / np.abs(base).mean())


def calibrated(model: ltx_jax.LTXModel, tokens: int, steps: int) -> ltx_jax.LTXModel:
    """`model` (fp8) with static input scales: each fp8 linear's largest input over a `steps` Euler loop
    at `tokens` from noise no timed or quality run uses, / 448."""
    data = bench_step.inputs(tokens, np.random.default_rng(1))
    step = nnx.jit(lambda m, v, a: m(v, a, bench_step.jax_perturbations(False)))

    def loop(m: ltx_jax.LTXModel) -> None:
        def velocity(d: dict) -> np.ndarray:
            return np.asarray(step(m, *(bench_step.jax_modality(d[k]) for k in ("video", "audio")))[0], np.float32)

        euler_loop(velocity, data, steps)

    calibrate_input_scales(model, loop)
    return model


def build_models(cfg: ltx_jax.LTXConfig, args: argparse.Namespace) -> dict[str, object]:
    """The rows: ltx-core bf16 (eager, and compiled with `--torch-compile`) and fp8-cast, unless `--jax-only`;
    ltx-jax bf16, fp8-cast, fp8 matmuls alone, fp8 with fp8 attention and the same with static input
    scales, all from the same weights."""
    torch_bf16 = bench_step.torch_reference(cfg, args.device)

    def ours() -> ltx_jax.LTXModel:
        return ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), torch_bf16.state_dict())

    cast = ours()
    quantize_fp8_cast(cast, [(k, entry[0]) for k, entry in expected_keys(cast).items()], jnp.bfloat16)
    models = {}
    if not args.jax_only:
        models["ltx-core bf16"] = torch_bf16
        if args.torch_compile:
            models["ltx-core bf16 compiled"] = bench_step.torch_compiled(torch_bf16, cfg.num_layers, len(args.tokens))
        models["ltx-core fp8-cast"] = torch_fp8_cast(copy.deepcopy(torch_bf16))
    models["ltx-jax bf16"] = ours()
    models["ltx-jax fp8-cast"] = cast
    models["ltx-jax fp8 matmuls"] = quantize_fp8(ours(), attention=False)
    models["ltx-jax fp8"] = quantize_fp8(ours())
    models["ltx-jax fp8 static"] = calibrated(quantize_fp8(ours()), min(args.tokens), args.steps)
    return models


def time_and_memory(
    name: str, model: object, run: Callable, data: dict, args: argparse.Namespace
) -> tuple[float, int, jax.stages.Compiled | None]:
    """Median seconds of `run(data)`, peak device bytes (torch's allocator peak over the timed runs, or XLA's
    memory plan for ltx-jax: parameters, inputs, outputs, temporaries) and ltx-jax's compiled program."""
    if "core" not in name:
        _, seconds = bench_step.median_seconds(lambda: run(data), jax.block_until_ready, args.repeats)
        program = compiled_forward(model, data)
        return seconds, jax_peak_bytes(program), program
    on_gpu = args.device == "cuda"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    sync = (lambda _: torch.cuda.synchronize()) if on_gpu else (lambda _: None)
    _, seconds = bench_step.median_seconds(lambda: run(data), sync, args.repeats)
    return seconds, torch.cuda.max_memory_allocated() if on_gpu else 0, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10, help="Euler steps of the quality loop")
    parser.add_argument("--torch-compile", action="store_true", help="also time ltx-core bf16 under torch.compile")
    parser.add_argument("--jax-only", action="store_true", help="no ltx-core rows")
    parser.add_argument("--device", default="cuda", help="torch device (cpu only to check the script)")
    args = parser.parse_args()
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers, av_ca_scale_shift_from_sigma=True)
    models = build_models(cfg, args)
    forwards = {
        name: torch_forward(model, args.device) if "core" in name else jax_forward(model)
        for name, model in models.items()
    }
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; {args.layers} blocks")
    for name, model in models.items():
        print(f"{name:>22}: parameters {parameter_bytes(model) / 1e9:.2f} GB")
    for tokens in args.tokens:
        data = bench_step.inputs(tokens, np.random.default_rng(tokens))
        print(f"-- {tokens} video tokens; time (x ltx-jax bf16), peak device memory, velocity vs its side's bf16")
        outputs, seconds, peaks, programs = {}, {}, {}, {}
        for name, (to_numpy, run) in forwards.items():
            seconds[name], peaks[name], programs[name] = time_and_memory(name, models[name], run, data, args)
            outputs[name] = to_numpy(data)
        for name, took in seconds.items():
            base = outputs[f"{name.split()[0]} bf16"]
            worst, mean = relative(outputs[name] - base, base)
            print(f"{name:>22}: {took * 1e3:7.1f} ms ({took / seconds['ltx-jax bf16']:.3f}x) "
                  f"{peaks[name] / 2**30:6.2f} GiB; velocity max {worst:.2e} mean {mean:.2e}")  # fmt: skip
        for name in ("ltx-jax fp8", "ltx-jax fp8 static"):
            gemms, attention = fp8_kernels(programs[name])
            print(f"   {name}'s program: {gemms} fp8 GEMMs, {attention} fp8 attention calls")
    data = bench_step.inputs(args.tokens[0], np.random.default_rng(0))
    start = time.perf_counter()
    loops = [("ltx-core", "fp8-cast")] if "ltx-core bf16" in forwards else []
    for side, mode in [*loops, *(("ltx-jax", m) for m in ("fp8-cast", "fp8 matmuls", "fp8", "fp8 static"))]:
        base = euler_loop(forwards[f"{side} bf16"][0], data, args.steps)
        fp8 = euler_loop(forwards[f"{side} {mode}"][0], data, args.steps)
        l2 = float(np.linalg.norm(fp8 - base) / np.linalg.norm(base))
        print(
            f"{side:>9}: {args.steps}-step Euler loop at {args.tokens[0]} tokens, {mode} vs bf16 relative L2 {l2:.2e}"
        )
    print(f"(quality loops {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
