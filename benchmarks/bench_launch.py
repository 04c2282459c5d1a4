"""What `ltx_jax.parallel.launch` costs: chained DiT forwards through it and with its programs called
directly, alternating; and what its bound would cost there (`--bound-everywhere`).

    python benchmarks/bench_launch.py --layers 48 --tokens 6144 --forwards 4 --rounds 5   # one GPU

Builds the DiT at LTX-2.3 width with random bf16 weights, runs `--forwards` forwards under
`SequenceParallel` back to back without waiting between them (as a denoising loop does), and times the
whole chain through the launcher as it ships (its lock; on CPU devices, its bound) and with the
programs called directly, in alternating rounds on one warm program; prints the medians and their
ratio. `--bound-everywhere` applies the CPU bound (wait every `MAX_IN_FLIGHT` unfinished launches) on
any device, to time it on a GPU.
"""

import argparse
import time
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import ltx_jax
from ltx_jax.parallel import SequenceParallel, launch, make_mesh


class BoundEverywhere(launch.Launcher):
    """The launcher with its CPU bound on every platform: waits as it would on CPU devices."""

    def __call__(self, program, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN204
        outputs = program(*args, **kwargs)
        self._unfinished.append([weakref.ref(x) for x in jax.tree.leaves(outputs) if isinstance(x, jax.Array)])
        if len(self._unfinished) > self.max_in_flight:
            self._wait_for_oldest()
        return outputs


def direct(program, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    return program(*args, **kwargs)


def modality(tokens: int, channels: int, context_dim: int, axes: int) -> ltx_jax.Modality:
    starts = np.repeat(np.arange(tokens, dtype=np.float32)[None, None] / 10, axes, axis=1)
    return ltx_jax.Modality(
        latent=jnp.full((1, tokens, channels), 0.5, jnp.bfloat16),
        sigma=jnp.ones((1,), jnp.float32),
        timesteps=jnp.ones((1, tokens, 1), jnp.float32),
        positions=jnp.asarray(np.stack([starts, starts + 0.1], axis=-1)),
        context=jnp.full((1, 32, context_dim), 0.5, jnp.bfloat16),
    )


def chain_seconds(sp: SequenceParallel, video: ltx_jax.Modality, audio: ltx_jax.Modality, forwards: int) -> float:
    start = time.perf_counter()
    outputs = [sp(video, audio) for _ in range(forwards)]
    jax.block_until_ready(outputs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=6144)
    parser.add_argument("--audio-tokens", type=int, default=126)
    parser.add_argument("--forwards", type=int, default=4, help="forwards chained in one timing")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each setting")
    parser.add_argument("--bound-everywhere", action="store_true", help="time the CPU bound on any device")
    args = parser.parse_args()
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind} ({jax.default_backend()})")
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16)
    video = modality(args.tokens, cfg.in_channels, cfg.cross_attention_dim, 3)
    audio = modality(args.audio_tokens, cfg.audio_in_channels, cfg.audio_cross_attention_dim, 1)
    sp = SequenceParallel(model, make_mesh(1))
    jax.block_until_ready(sp(video, audio))  # compile
    shipped = BoundEverywhere(launch.MAX_IN_FLIGHT) if args.bound_everywhere else launch.LAUNCHER
    settings = {"launcher": shipped, "direct": direct}
    times: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(args.rounds):
        for name, launcher in settings.items():
            launch.LAUNCHER = launcher  # `launch` calls the module's LAUNCHER
            times[name].append(chain_seconds(sp, video, audio, args.forwards))
    medians = {name: float(np.median(values)) for name, values in times.items()}
    print(f"{args.layers} blocks, {args.tokens} video tokens, {args.forwards} chained forwards, {args.rounds} rounds")
    for name, values in times.items():
        print(f"{name}: {medians[name] * 1e3:.1f} ms (all: {[round(t * 1e3, 1) for t in values]})")
    label = f"bound {launch.MAX_IN_FLIGHT} everywhere" if args.bound_everywhere else "launcher as shipped"
    print(f"{label} / direct: {medians['launcher'] / medians['direct']:.4f}")


if __name__ == "__main__":
    main()
