"""fp8-cast and fp8 against bf16, ltx-jax and ltx-core side by side: speed, weight memory, quality (issue #24).

    python benchmarks/bench_fp8_cast.py --layers 8 --tokens 6144 24576 --repeats 10 --steps 10

LTX-2.3 width, random weights (bench_step.py's model and inputs), bf16, one GPU. ltx-core's
fp8-cast is its own `QuantizationPolicy.fp8_cast()` pieces (`TRANSFORMER_LINEAR_DOWNCAST_MAP`,
`UPCAST_DURING_INFERENCE`) applied to a copy of the same weights; ltx-jax's is
`ltx_jax.model.quantization.quantize_fp8_cast`. ltx-jax's fp8 is `quantize_fp8` (fp8 matmuls in
blocks 1.. of the `--layers`; block 0 stays, as ltx-core's fp8_scaled_mm keeps it; that mode needs
TensorRT-LLM, absent here, so it has no ltx-core row). Per token count: the median forward time of
each of the five models; the models' parameter bytes; each fp8 forward's video velocity against its
own bf16 model (max |diff| / max |bf16|, mean |diff| / mean |bf16|); how many of the compiled fp8
program's GEMMs take fp8 operands; and after a `--steps` Euler denoising loop from the same noise (a
constant context, sigma 1 -> 0), the relative L2 of the final fp8 latents against the bf16 ones.
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
from ltx_jax.model.quantization import quantize_fp8, quantize_fp8_cast  # noqa: E402

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


def fp8_gemms(model: ltx_jax.LTXModel, data: dict) -> int:
    """How many GEMMs of the forward, compiled as it is timed, run as cuBLASLt's fp8 GEMM. Counted by
    custom-call target: the compiled HLO's text names a call's operands without their types (counting
    lines that also said f8e4m3fn found none, 2026-12-02 to 12-05)."""
    graphdef, state = nnx.split(model)
    perturbations = bench_step.jax_perturbations(False)
    video, audio = (bench_step.jax_modality(data[k]) for k in ("video", "audio"))
    forward = jax.jit(
        lambda s, v, a: nnx.merge(graphdef, s)(v, a, perturbations), compiler_options=bench_step.COMPILER_OPTIONS
    )
    return forward.lower(state, video, audio).compile().as_text().count('custom_call_target="__cublas$lt$matmul$f8"')


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10, help="Euler steps of the quality loop")
    parser.add_argument("--device", default="cuda", help="torch device (cpu only to check the script)")
    args = parser.parse_args()
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers, av_ca_scale_shift_from_sigma=True)
    torch_bf16 = bench_step.torch_reference(cfg, args.device)
    jax_bf16 = ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), torch_bf16.state_dict())
    jax_fp8 = ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), torch_bf16.state_dict())
    quantize_fp8_cast(jax_fp8, [(k, entry[0]) for k, entry in expected_keys(jax_fp8).items()], jnp.bfloat16)
    torch_fp8 = torch_fp8_cast(copy.deepcopy(torch_bf16))
    jax_fp8_mm = quantize_fp8(
        ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), torch_bf16.state_dict())
    )
    models = {"ltx-core bf16": torch_bf16, "ltx-core fp8-cast": torch_fp8, "ltx-jax bf16": jax_bf16,
              "ltx-jax fp8-cast": jax_fp8, "ltx-jax fp8": jax_fp8_mm}  # fmt: skip
    forwards = {
        name: torch_forward(model, args.device) if "core" in name else jax_forward(model)
        for name, model in models.items()
    }
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; {args.layers} blocks")
    for name, model in models.items():
        print(f"{name:>18}: parameters {parameter_bytes(model) / 1e9:.2f} GB")
    for tokens in args.tokens:
        data = bench_step.inputs(tokens, np.random.default_rng(tokens))
        print(f"-- {tokens} video tokens")
        outputs, seconds = {}, {}
        for name, (to_numpy, run) in forwards.items():
            sync = jax.block_until_ready
            if "core" in name:
                sync = (lambda _: torch.cuda.synchronize()) if args.device == "cuda" else (lambda _: None)
            _, seconds[name] = bench_step.median_seconds(lambda run=run, data=data: run(data), sync, args.repeats)
            outputs[name] = to_numpy(data)
        for side in ("ltx-core", "ltx-jax"):
            base, fp8 = outputs[f"{side} bf16"], outputs[f"{side} fp8-cast"]
            worst, mean = relative(fp8 - base, base)
            ratio = seconds[f"{side} fp8-cast"] / seconds[f"{side} bf16"]
            print(f"{side:>9}: bf16 {seconds[f'{side} bf16'] * 1e3:7.1f} ms, fp8-cast "
                  f"{seconds[f'{side} fp8-cast'] * 1e3:7.1f} ms ({ratio:.3f}x); velocity vs bf16: max {worst:.2e}, "
                  f"mean {mean:.2e}")  # fmt: skip
        worst, mean = relative(outputs["ltx-jax fp8"] - outputs["ltx-jax bf16"], outputs["ltx-jax bf16"])
        ratio = seconds["ltx-jax fp8"] / seconds["ltx-jax bf16"]
        print(f"  ltx-jax: fp8 matmuls {seconds['ltx-jax fp8'] * 1e3:7.1f} ms ({ratio:.3f}x bf16); velocity vs bf16: "
              f"max {worst:.2e}, mean {mean:.2e}; fp8 GEMMs in the program: {fp8_gemms(jax_fp8_mm, data)}")  # fmt: skip
        ours = seconds["ltx-jax fp8-cast"] / seconds["ltx-core fp8-cast"]
        worst, _ = relative(outputs["ltx-jax fp8-cast"] - outputs["ltx-core fp8-cast"], outputs["ltx-core fp8-cast"])
        print(f"   fp8-cast ltx-jax/ltx-core: {ours:.3f}x time; max rel diff of the two fp8 outputs {worst:.2e}")
    data = bench_step.inputs(args.tokens[0], np.random.default_rng(0))
    start = time.perf_counter()
    for side, mode in (("ltx-core", "fp8-cast"), ("ltx-jax", "fp8-cast"), ("ltx-jax", "fp8")):
        base = euler_loop(forwards[f"{side} bf16"][0], data, args.steps)
        fp8 = euler_loop(forwards[f"{side} {mode}"][0], data, args.steps)
        l2 = float(np.linalg.norm(fp8 - base) / np.linalg.norm(base))
        print(
            f"{side:>9}: {args.steps}-step Euler loop at {args.tokens[0]} tokens, {mode} vs bf16 relative L2 {l2:.2e}"
        )
    print(f"(quality loops {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
