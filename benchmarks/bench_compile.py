"""Compile time and forward time of the DiT compiled whole against block programs, same weights, same run.

    python benchmarks/bench_compile.py                  # LTX-2.3 width, 48 blocks, random bf16 weights
    python benchmarks/bench_compile.py --tiny --repeats 1 --rounds 1    # the tiny config: checks the script on CPU
    PYTHONPATH=OTHER_TREE python benchmarks/bench_compile.py --modes blocks --shapes stage1   # another ltx_jax

`SequenceParallel` on a one-device mesh, as `generate.py` runs the DiT, with `block_programs=False`
(the forward one program, 48 blocks unrolled) and `True` (prepare, one program per distinct block,
finish). Two shapes of the two-stage 1536x1024x121 flow: stage 1's guided step (the reference's
CFG + STG + modality passes batched: 4 x 6,144 video tokens) and stage 2 (1 x 24,576). Per mode and
shape: the first call (compiling and running; no persistent compilation cache), how many programs
it compiled, then `--rounds` rounds alternating the modes, each the median of `--repeats` calls.
Timesteps are one per sample, `(B, 1, 1)`, as the pipelines pass them where every token is generated
(since 2026-12-05; per token before: results from before then timed that program).
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.parallel import SequenceParallel, make_mesh  # noqa: E402
from ltx_jax.pipeline.defaults import reference_guidance  # noqa: E402
from ltx_jax.pipeline.guiders import guidance_passes  # noqa: E402

STG_BLOCK = 28
SHAPES = {"stage1": (4, 6144), "stage2": (1, 24576)}  # (batch, video tokens)
TOKENS = {"audio": 126, "text": 1024}
TINY_DIVISOR = 64  # --tiny: video, audio and text tokens divided by this
MODES = ["whole", "blocks"]


def random_model(cfg: ltx_jax.LTXConfig) -> ltx_jax.LTXModel:
    """The DiT with random bf16 weights made on the device (1/sqrt(fan-in) scale, tables 0.5)."""
    model = ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16)
    graphdef, state = nnx.split(model)
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(0), len(leaves))
    values = [
        jax.random.normal(key, leaf.shape, jnp.bfloat16)
        * (0.5 if leaf.ndim == 2 and leaf.shape[0] < 16 else 1 / leaf.shape[0] ** 0.5)
        for key, leaf in zip(keys, leaves, strict=True)
    ]
    return nnx.merge(graphdef, jax.tree.unflatten(treedef, values))


def modality(batch: int, tokens: int, axes: int, channels: int, context_dim: int) -> ltx_jax.Modality:
    rng = np.random.default_rng(tokens)
    starts = np.repeat(np.arange(tokens, dtype=np.float32)[None, None] / 24, axes, axis=1)
    positions = np.repeat(np.stack([starts, starts + 1 / 24], axis=-1), batch, axis=0)
    return ltx_jax.Modality(
        latent=jnp.asarray(rng.standard_normal((batch, tokens, channels)), jnp.bfloat16),
        sigma=jnp.full((batch,), 0.7, jnp.float32),
        timesteps=jnp.full((batch, 1, 1), 0.7, jnp.float32),  # one per sample, as text-to-video passes them
        positions=jnp.asarray(positions),
        context=jnp.asarray(rng.standard_normal((batch, TOKENS["text"], context_dim)), jnp.bfloat16),
    )


def shape_inputs(cfg: ltx_jax.LTXConfig, batch: int, tokens: int) -> tuple:
    video = modality(batch, tokens, 3, cfg.in_channels, cfg.caption_channels or cfg.cross_attention_dim)
    audio = modality(
        batch, TOKENS["audio"], 1, cfg.audio_in_channels, cfg.caption_channels or cfg.audio_cross_attention_dim
    )
    if batch == 1:
        return video, audio, None
    guidance = reference_guidance(min(STG_BLOCK, cfg.num_layers - 1))
    passes = guidance_passes(guidance.video, guidance.audio)
    assert len(passes) == batch, passes
    return video, audio, ltx_jax.BatchedPerturbationConfig(tuple(config for _, config in passes))


def timed(forward: SequenceParallel, inputs: tuple) -> float:
    start = time.perf_counter()
    jax.block_until_ready(forward(*inputs))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="the tiny test config and 1/64 of the tokens")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=MODES, help="'whole' takes 36-53 s a shape")
    args = parser.parse_args()
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers)
    divisor = 1
    if args.tiny:
        cfg, divisor = ltx_jax.LTXConfig.tiny(num_layers=args.layers), TINY_DIVISOR
        TOKENS.update((name, count // divisor) for name, count in TOKENS.items())
    start = time.perf_counter()
    model = random_model(cfg)
    jax.block_until_ready(nnx.state(model))
    print(
        f"{jax.devices()[0].device_kind}; jax {jax.__version__}; {args.layers} blocks, bf16, random weights "
        f"made in {time.perf_counter() - start:.1f} s"
    )
    mesh = make_mesh(1)
    forwards = {mode: SequenceParallel(model, mesh, block_programs=mode == "blocks") for mode in args.modes}
    for shape in args.shapes:
        batch, tokens = SHAPES[shape]
        inputs = shape_inputs(cfg, batch, tokens // divisor)
        for mode, forward in forwards.items():
            first = timed(forward, inputs)
            print(f"{shape} {mode:>6}: first call {first:7.2f} s, compiled {forward.compiled()}", flush=True)
        rows = {mode: [] for mode in forwards}
        for _ in range(args.rounds):
            for mode, forward in forwards.items():
                rows[mode].append(statistics.median(timed(forward, inputs) for _ in range(args.repeats)))
        whole = statistics.median(rows["whole"]) if "whole" in rows else None
        for mode, medians in rows.items():
            seconds = statistics.median(medians)
            ratio = f", {seconds / whole:.4f} of whole" if whole else ""
            rounds = [round(m * 1e3, 1) for m in medians]
            print(f"{shape} {mode:>6}: forward {seconds * 1e3:8.1f} ms (rounds {rounds}){ratio}", flush=True)


if __name__ == "__main__":
    main()
