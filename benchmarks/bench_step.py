"""One DiT forward, ltx-jax against ltx-core, same weights, same GPU, same run.

    python benchmarks/bench_step.py                       # 8 blocks, 6144 and 24576 video tokens
    python benchmarks/bench_step.py --layers 8 --tokens 6144 24576 --repeats 10
    python benchmarks/bench_step.py --torch-compile       # adds ltx-core under torch.compile as a row
    python benchmarks/bench_step.py --compare-per-sample-timesteps 3   # ltx-jax, (1, T, 1) against (1, 1, 1)
    python benchmarks/bench_step.py --variant heuristics:xla_gpu_autotune_level=0 --variant-rounds 3
        # ltx-jax compiled with DIT_COMPILER_OPTIONS plus these options, against DIT_COMPILER_OPTIONS alone

LTX-2.3 width (video 32x128 heads, audio 32x64, FFN 4x, gated attention, cross-attention AdaLN),
bf16, batch 1, 126 audio tokens, 1024 text tokens per modality. ltx-core 1.0.0 runs eager with its
default attention (SDPA), and with `--torch-compile` also under `torch.compile` (default mode, compile
time excluded: the warm-up runs compile); ltx-jax runs jitted with `attention_backend="auto"` (cuDNN). Prints
seconds per forward (median of warmed-up runs, CUDA-synchronized) and jax/torch. A forward of all
48 blocks costs about 48/8 of these 8-block times plus the fixed preprocessing and output head.
Needs a CUDA GPU, torch with CUDA and ltx-core (a pure-Python wheel: `pip install --no-deps`).
"""

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # entry point: share the GPU with torch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402
from ltx_core.guidance.perturbations import (  # noqa: E402
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_core.model.transformer.modality import Modality as TorchModality  # noqa: E402
from ltx_core.model.transformer.model import LTXModel as TorchLTXModel  # noqa: E402
from ltx_core.model.transformer.model import LTXModelType  # noqa: E402
from ltx_core.model.transformer.rope import LTXRopeType  # noqa: E402

import ltx_jax  # noqa: E402

AUDIO_TOKENS, TEXT_TOKENS = 126, 1024
# Versions of ltx_jax before the optimization pass (timed side by side, benchmarks/results/2026-11-29/optimization)
# have no DIT_COMPILER_OPTIONS: they compiled with XLA's defaults.
COMPILER_OPTIONS = getattr(ltx_jax, "DIT_COMPILER_OPTIONS", {})


def torch_reference(cfg: ltx_jax.LTXConfig, device: str) -> TorchLTXModel:
    with torch.device(device):
        model = TorchLTXModel(
            model_type=LTXModelType.AudioVideo,
            num_layers=cfg.num_layers,
            rope_type=LTXRopeType.SPLIT,
            double_precision_rope=True,
            apply_gated_attention=True,
            cross_attention_adaln=True,
            av_ca_timestep_scale_multiplier=1000,
        ).to(torch.bfloat16)
    generator = torch.Generator(device).manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            scale = 0.5 if "table" in name else 1.0 / param.shape[-1] ** 0.5
            param.copy_(torch.randn(param.shape, generator=generator, device=device, dtype=torch.float32) * scale)
    return model.eval()


Inputs = dict[str, dict[str, np.ndarray]]  # per modality, the Modality fields as numpy arrays


def inputs(tokens: int, rng: np.random.Generator) -> Inputs:
    def stream(n: int, axes: int, context_dim: int) -> dict[str, np.ndarray]:
        starts = np.repeat(np.arange(n, dtype=np.float32)[None, None] / 24, axes, axis=1)
        return {
            "latent": rng.standard_normal((1, n, 128), np.float32),
            "sigma": np.full((1,), 0.7, np.float32),
            "timesteps": np.full((1, n, 1), 0.7, np.float32),
            "positions": np.stack([starts, starts + 1 / 24], axis=-1),
            "context": rng.standard_normal((1, TEXT_TOKENS, context_dim), np.float32),
        }

    return {"video": stream(tokens, 3, 4096), "audio": stream(AUDIO_TOKENS, 1, 2048)}


def per_sample(data: Inputs) -> Inputs:
    """The same inputs with one timestep per sample, `(1, 1, 1)`: what the pipelines pass where every token is
    generated (AdaLN computed once per sample)."""
    return {k: dict(fields, timesteps=fields["timesteps"][:, :1]) for k, fields in data.items()}


def torch_modality(fields: dict[str, np.ndarray], device: str) -> TorchModality:
    def tensor(name: str, value: np.ndarray) -> torch.Tensor:
        dtype = torch.bfloat16 if name in ("latent", "context") else torch.float32
        return torch.from_numpy(value).to(device=device, dtype=dtype)

    return TorchModality(**{name: tensor(name, value) for name, value in fields.items()})


def torch_perturbations(skip_video_self_attention: bool) -> BatchedPerturbationConfig:
    if not skip_video_self_attention:
        return BatchedPerturbationConfig.empty(1)
    skip = Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, None)
    return BatchedPerturbationConfig([PerturbationConfig([skip])])


def jax_perturbations(skip_video_self_attention: bool) -> ltx_jax.BatchedPerturbationConfig:
    skip = ltx_jax.Perturbation(ltx_jax.PerturbationType.SKIP_VIDEO_SELF_ATTN, None)
    return ltx_jax.BatchedPerturbationConfig(
        (ltx_jax.PerturbationConfig((skip,) if skip_video_self_attention else ()),)
    )


def jax_modality(fields: dict[str, np.ndarray]) -> ltx_jax.Modality:
    def array(name: str, value: np.ndarray) -> jax.Array:
        return jnp.asarray(value, jnp.bfloat16 if name in ("latent", "context") else jnp.float32)

    return ltx_jax.Modality(**{name: array(name, value) for name, value in fields.items()})


def median_seconds(fn, sync, repeats: int) -> tuple[object, float]:  # noqa: ANN001
    for _ in range(2):
        result = fn()
        sync(result)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sync(fn())
        times.append(time.perf_counter() - start)
    return result, float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cuda", help="torch device (cpu only to check the script)")
    parser.add_argument(
        "--skip-video-self-attention",
        action="store_true",
        help="both models skip video self-attention in every block (an STG perturbation): its share of the time",
    )
    parser.add_argument("--torch-compile", action="store_true", help="also time ltx-core under torch.compile")
    parser.add_argument(
        "--compare-xla-defaults",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time ltx-jax compiled with XLA's default options instead of DIT_COMPILER_OPTIONS, "
        "alternating the two ROUNDS times (each round a median of --repeats)",
    )
    parser.add_argument(
        "--compare-per-sample-timesteps",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time ltx-jax with one timestep per sample, (1, 1, 1), as the pipelines pass it where every "
        "token is generated, against the per-token (1, T, 1) of the main rows, alternating ROUNDS times",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="also time ltx-jax compiled with DIT_COMPILER_OPTIONS plus these XLA options (repeatable), "
        "alternating with DIT_COMPILER_OPTIONS alone --variant-rounds times, with one timestep per sample",
    )
    parser.add_argument("--variant-rounds", type=int, default=3, metavar="ROUNDS")
    args = parser.parse_args()
    variants = dict(parse_variant(text) for text in args.variant)
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers, av_ca_scale_shift_from_sigma=True)  # as ltx-core 1.0.0
    reference = torch_reference(cfg, args.device)
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), reference.state_dict())
    print(
        f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; "
        f"{args.layers} blocks, bf16, {AUDIO_TOKENS} audio + {TEXT_TOKENS} text tokens"
    )
    print(f"{'video tokens':>12} {'ltx-core':>10} {'ltx-jax':>10} {'jax/torch':>9} {'max rel diff':>12}")
    forward = jax_forward(model, args.skip_video_self_attention, COMPILER_OPTIONS)
    for tokens in args.tokens:
        data = inputs(tokens, np.random.default_rng(tokens))
        torch_s, jax_s, diff = measure(
            reference, forward, data, args.device, args.repeats, args.skip_video_self_attention
        )
        print(f"{tokens:>12} {torch_s * 1e3:>8.1f}ms {jax_s * 1e3:>8.1f}ms {jax_s / torch_s:>9.2f} {diff:>12.2e}")
        if args.torch_compile:
            print(f"{'':>12} torch.compile: {compiled_row(reference, data, args, jax_s)}")
        if args.compare_xla_defaults:
            print(f"{'':>12} {options_row(model, forward, data, args)}")
        if args.compare_per_sample_timesteps:
            print(f"{'':>12} {timesteps_row(forward, data, args)}")
        for name, options in variants.items():
            print(f"{'':>12} {variant_row(model, forward, data, name, options, args)}")


def parse_variant(text: str) -> tuple[str, dict[str, object]]:
    """`"name:key=value,key=value"` -> (name, DIT_COMPILER_OPTIONS plus those options, values as int/bool/str)."""
    name, _, pairs = text.partition(":")
    if not pairs:
        raise SystemExit(
            f"--variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE], e.g. lt:xla_gpu_enable_cublaslt=true"
        )

    def value(raw: str) -> object:
        if raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        return int(raw) if raw.lstrip("-").isdigit() else raw

    malformed = [pair for pair in pairs.split(",") if "=" not in pair]
    if not name or malformed:
        raise SystemExit(f"--variant {text!r}: every option needs KEY=VALUE, e.g. lt:xla_gpu_enable_cublaslt=true")
    extra = dict(pair.split("=", 1) for pair in pairs.split(","))
    return name, {**COMPILER_OPTIONS, **{key: value(raw) for key, raw in extra.items()}}


def variant_row(
    model: ltx_jax.LTXModel, forward: Callable, data: Inputs, name: str, options: dict, args: argparse.Namespace
) -> str:
    """`forward` (DIT_COMPILER_OPTIONS) against the model compiled with `options`, one timestep per sample,
    alternating rounds on the same inputs, and the largest relative difference of the video."""
    video, audio = (jax_modality(per_sample(data)[k]) for k in ("video", "audio"))
    variant = jax_forward(model, args.skip_video_self_attention, options)
    calls = {"base": lambda: forward(video, audio), name: lambda: variant(video, audio)}
    medians, diff, spread = alternating(calls, args.variant_rounds, args.repeats)
    return (
        f"{name} {medians[name] * 1e3:.1f}ms vs DIT_COMPILER_OPTIONS {medians['base'] * 1e3:.1f}ms: "
        f"{medians[name] / medians['base']:.3f}, max rel diff {diff:.2e} (rounds, ms: {spread})"
    )


def jax_forward(
    model: ltx_jax.LTXModel, skip_video_self_attention: bool, compiler_options: dict[str, bool]
) -> Callable[[ltx_jax.Modality, ltx_jax.Modality], tuple[jax.Array, jax.Array]]:
    """`model(video, audio, perturbations)` under `jax.jit` over the parameter pytree, taken once:
    nnx.jit re-walks the module graph in Python on every call (about 50 ms for 8 blocks on the CPU
    machine), which would be timed as part of the forward."""
    perturbations = jax_perturbations(skip_video_self_attention)
    graphdef, state = nnx.split(model)
    compiled = jax.jit(
        lambda state, v, a: nnx.merge(graphdef, state)(v, a, perturbations), compiler_options=compiler_options
    )
    return lambda video, audio: compiled(state, video, audio)


def torch_compiled(reference: TorchLTXModel, layers: int, token_counts: int) -> TorchLTXModel:
    """`torch.compile(reference)` (default mode) with room for every graph dynamo makes of it.

    ltx-core's blocks carry their index as an int attribute, which dynamo treats as static: one graph per
    block and per token count. With the default recompile limit of 8, dynamo gives up after the 8th and
    runs the rest eager (measured: the 24,576-token row was then the eager time)."""
    limit = 2 * layers * token_counts  # with room to spare
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
    return torch.compile(reference)


def compiled_row(reference: TorchLTXModel, data: Inputs, args: argparse.Namespace, jax_s: float) -> str:
    """ltx-core under `torch.compile` on `data`: its median time and jax/compiled, or why it failed."""
    torch_in = {k: torch_modality(fields, args.device) for k, fields in data.items()}
    compiled = torch_compiled(reference, args.layers, len(args.tokens))
    perturbations = torch_perturbations(args.skip_video_self_attention)
    start = time.perf_counter()
    try:
        with torch.inference_mode():
            _, seconds = median_seconds(
                lambda: compiled(torch_in["video"], torch_in["audio"], perturbations),
                lambda _: torch.cuda.synchronize() if args.device == "cuda" else None,
                args.repeats,
            )
    except Exception as error:  # noqa: BLE001 - a benchmark row: report why torch.compile could not run
        return f"failed after {time.perf_counter() - start:.0f} s: {type(error).__name__}: {str(error)[:300]}"
    total = time.perf_counter() - start
    return f"{seconds * 1e3:.1f}ms, jax/compiled {jax_s / seconds:.2f} (compile and runs {total:.0f} s)"


def alternating(
    calls: dict[str, Callable[[], object]], rounds: int, repeats: int
) -> tuple[dict[str, float], float, str]:
    """Two forwards in `calls` timed `rounds` times, alternating (each round a median of `repeats`): the median
    of each one's rounds, the largest relative difference of the second's video output from the first's, and
    the rounds as text."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    outputs = {}
    for _ in range(rounds):
        for name, call in calls.items():
            outputs[name], seconds = median_seconds(call, jax.block_until_ready, repeats)
            times[name].append(seconds)
    spread = " ".join(f"{name} " + "/".join(f"{s * 1e3:.1f}" for s in values) for name, values in times.items())
    first, second = (np.asarray(output[0], np.float32) for output in outputs.values())
    diff = float(np.abs(second - first).max() / np.abs(first).max())
    return {name: float(np.median(values)) for name, values in times.items()}, diff, spread


def options_row(model: ltx_jax.LTXModel, forward: Callable, data: Inputs, args: argparse.Namespace) -> str:
    """`forward` (compiled with DIT_COMPILER_OPTIONS) against the model compiled with XLA's defaults,
    alternating rounds on the same inputs."""
    video, audio = (jax_modality(data[k]) for k in ("video", "audio"))
    defaults = jax_forward(model, args.skip_video_self_attention, {})
    calls = {"options": lambda: forward(video, audio), "defaults": lambda: defaults(video, audio)}
    medians, _, spread = alternating(calls, args.compare_xla_defaults, args.repeats)
    ours, theirs = medians["options"], medians["defaults"]
    return (
        f"DIT_COMPILER_OPTIONS {ours * 1e3:.1f}ms vs XLA defaults {theirs * 1e3:.1f}ms: {ours / theirs:.3f} "
        f"(rounds, ms: {spread})"
    )


def timesteps_row(forward: Callable, data: Inputs, args: argparse.Namespace) -> str:
    """`forward` with per-token timesteps `(1, T, 1)` against one per sample `(1, 1, 1)` (the same values:
    AdaLN computed once per sample), alternating rounds, and the largest relative difference of the video."""
    inputs_of = {"per token": data, "per sample": per_sample(data)}
    modalities = {name: {k: jax_modality(f) for k, f in d.items()} for name, d in inputs_of.items()}
    calls = {name: lambda m=m: forward(m["video"], m["audio"]) for name, m in modalities.items()}
    medians, diff, spread = alternating(calls, args.compare_per_sample_timesteps, args.repeats)
    token, sample = medians["per token"], medians["per sample"]
    return (
        f"timesteps per sample {sample * 1e3:.1f}ms vs per token {token * 1e3:.1f}ms: {sample / token:.3f}, "
        f"max rel diff {diff:.2e} (rounds, ms: {spread})"
    )


def measure(  # noqa: ANN201
    reference: TorchLTXModel, forward: Callable, data: Inputs, device: str, repeats: int, skip: bool
):
    """(ltx-core seconds, ltx-jax seconds, max relative difference of the video outputs)."""
    torch_in = {k: torch_modality(fields, device) for k, fields in data.items()}
    jax_in = {k: jax_modality(fields) for k, fields in data.items()}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.inference_mode():
        theirs, torch_s = median_seconds(
            lambda: reference(torch_in["video"], torch_in["audio"], torch_perturbations(skip)),
            lambda _: sync(),
            repeats,
        )
    ours, jax_s = median_seconds(lambda: forward(jax_in["video"], jax_in["audio"]), jax.block_until_ready, repeats)
    ref = theirs[0].float().cpu().numpy()
    return torch_s, jax_s, float(np.abs(np.asarray(ours[0], np.float32) - ref).max() / np.abs(ref).max())


if __name__ == "__main__":
    main()
