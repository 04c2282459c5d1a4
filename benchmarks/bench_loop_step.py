"""A denoising loop's step, ltx-jax against ltx-core eager and under torch.compile: same weights, same GPU, same run.

    python benchmarks/bench_loop_step.py --layers 8 --tokens 6144 24576 --steps 10 --rounds 3

`bench_step.py` times one forward and waits for it; a denoising loop does not wait between steps: each step's
velocity moves the latent (an Euler update) and the next forward reads it, while the host is already
launching. This times `--steps` such steps back to back, one wait at the end, and reports the time per step
(median of `--rounds` loops, after a first loop that warms up and, for torch.compile, compiles; the rows'
rounds alternate). Rows:
ltx-core eager and under torch.compile (default mode) with a timestep per token, as ltx-pipelines passes
them; ltx-jax with a timestep per token, and with one per sample, as its pipelines pass them where every token
is generated (docs/pipeline.md, "Timesteps"). The same model, weights and inputs as `bench_step.py`
(which this imports). Needs a CUDA GPU.
"""

import argparse
import dataclasses
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

import ltx_jax  # noqa: E402

DT = 0.01  # the Euler step's sigma decrement: small, so that ten steps keep the latent in range


def jax_loop(
    model: ltx_jax.LTXModel, data: bench_step.Inputs, options: dict[str, object] | None = None
) -> Callable[[int], object]:
    """`steps` -> the last video velocity of that many chained steps (the forward and the update: two
    programs a step, as the pipelines' loop dispatches them); the forward compiled with `options`
    (DIT_COMPILER_OPTIONS where None)."""
    forward = bench_step.jax_forward(model, False, bench_step.COMPILER_OPTIONS if options is None else options)
    advance = jax.jit(lambda latent, velocity: latent - (velocity * DT).astype(latent.dtype))
    start = {k: bench_step.jax_modality(fields) for k, fields in data.items()}

    def run(steps: int) -> jax.Array:
        video, audio = start["video"], start["audio"]
        for _ in range(steps):
            v, a = forward(video, audio)
            video = dataclasses.replace(video, latent=advance(video.latent, v))
            audio = dataclasses.replace(audio, latent=advance(audio.latent, a))
        jax.block_until_ready(video.latent)
        return v

    return run


def torch_loop(module: torch.nn.Module, data: bench_step.Inputs, device: str) -> Callable[[int], object]:
    start = {k: bench_step.torch_modality(fields, device) for k, fields in data.items()}
    perturbations = bench_step.torch_perturbations(False)

    def run(steps: int) -> torch.Tensor:
        video, audio = start["video"], start["audio"]
        with torch.inference_mode():
            for _ in range(steps):
                v, a = module(video, audio, perturbations)
                video = dataclasses.replace(video, latent=video.latent - v * DT)
                audio = dataclasses.replace(audio, latent=audio.latent - a * DT)
        if device == "cuda":
            torch.cuda.synchronize()
        return v

    return run


def per_step_seconds(
    loops: dict[str, Callable[[int], object]], steps: int, rounds: int
) -> dict[str, tuple[float, list[float], object]]:
    """Per loop: the median seconds per step over `rounds` loops of `steps`, the rounds, the last loop's last
    velocity. One unmeasured loop each first; then the rounds alternate between the loops, so that each
    meets the GPU in the same state (the GPUs here run at their power cap, and their clocks follow the load)."""
    last = {name: run(steps) for name, run in loops.items()}
    times: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, run in loops.items():
            begin = time.perf_counter()
            last[name] = run(steps)
            times[name].append((time.perf_counter() - begin) / steps)
    return {name: (float(np.median(times[name])), times[name], last[name]) for name in loops}


def as_numpy(array: object) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        return array.float().cpu().numpy()
    return np.asarray(array, np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--steps", type=int, default=10, help="chained steps per loop")
    parser.add_argument("--rounds", type=int, default=3, help="timed loops per row (the median is reported)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="also a row of ltx-jax per sample compiled with DIT_COMPILER_OPTIONS plus these XLA options",
    )
    parser.add_argument("--device", default="cuda", help="torch device (cpu only to check the script)")
    args = parser.parse_args()
    variants = dict(bench_step.parse_variant(text) for text in args.variant)
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers, av_ca_scale_shift_from_sigma=True)
    reference = bench_step.torch_reference(cfg, args.device)
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16), reference.state_dict())
    compiled = bench_step.torch_compiled(reference, args.layers, len(args.tokens))
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; {args.layers} blocks")
    print(f"{args.steps} chained steps per loop, median of {args.rounds} loops; ms per step")
    for tokens in args.tokens:
        data = bench_step.inputs(tokens, np.random.default_rng(tokens))
        per_sample = bench_step.per_sample(data)
        loops = {
            "ltx-core eager": torch_loop(reference, data, args.device),
            "ltx-core torch.compile": torch_loop(compiled, data, args.device),
            "ltx-jax, per token": jax_loop(model, data),
            "ltx-jax, per sample": jax_loop(model, per_sample),
        } | {f"ltx-jax, per sample, {name}": jax_loop(model, per_sample, opts) for name, opts in variants.items()}
        results = per_step_seconds(loops, args.steps, args.rounds)
        base, reference_velocity = results["ltx-core torch.compile"][0], as_numpy(results["ltx-core eager"][2])
        print(f"-- {tokens} video tokens")
        for name, (seconds, rounds, velocity) in results.items():
            diff = np.abs(as_numpy(velocity) - reference_velocity).max() / np.abs(reference_velocity).max()
            spread = "/".join(f"{s * 1e3:.1f}" for s in rounds)
            print(
                f"{name:>28}: {seconds * 1e3:7.1f} ms ({seconds / base:.3f}x torch.compile; rounds {spread}); "
                f"last velocity vs ltx-core eager's, max rel diff {diff:.2e}"
            )


if __name__ == "__main__":
    main()
