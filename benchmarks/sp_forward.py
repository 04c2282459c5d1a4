"""One DiT forward under sequence parallelism, checked against a single device.

    python benchmarks/sp_forward.py --mesh 8                       # tiny model; simulated CPU devices without a GPU
    python benchmarks/sp_forward.py --mesh 2 --width full --tokens 6144 --audio-tokens 126   # on GPUs
    python benchmarks/sp_forward.py --mesh 2 4 --width full --layers 8 --tokens 6144 --audio-tokens 126 \
        --backend all_to_all ffi ffi_graph          # every mesh size x every head exchange, one model

Builds an LTX-2 DiT with random weights (the tiny test geometry in float32, or LTX-2.3 width in
bfloat16), runs it on one device and split over each `--mesh` size with Ulysses attention and each
`--backend`, and prints the timings, the speed-up over one device and the difference.
"""

import argparse
import time

from ltx_jax.cli.devices import simulate_cpu_devices_if_needed  # noqa: E402

BACKENDS = {
    "all_to_all": "jax.lax.all_to_all (NCCL on GPUs)",
    "ffi": "the CUDA peer-to-peer custom call",
    "ffi_graph": "the same, marked CUDA-graph compatible (FfiAllToAll(mesh, command_buffer=True))",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mesh", type=int, nargs="+", default=[8], help="devices on the sequence axis; several sizes run in turn"
    )
    parser.add_argument("--tokens", type=int, default=121, help="video tokens, any count (default 121)")
    parser.add_argument("--audio-tokens", type=int, default=13, help="audio tokens (default 13)")
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    parser.add_argument("--width", choices=["tiny", "full"], default="tiny", help="tiny test geometry or LTX-2.3 width")
    parser.add_argument("--cpu", action="store_true", help="simulated CPU devices even if a GPU is present")
    parser.add_argument("--repeats", type=int, default=3, help="timed forwards after warm-up (default 3)")
    parser.add_argument(
        "--backend",
        nargs="+",
        choices=list(BACKENDS),
        default=["all_to_all"],
        help="head exchanges to time, in turn: " + "; ".join(f"{k}: {v}" for k, v in BACKENDS.items()),
    )
    return parser.parse_args()


ARGS = parse_args()
simulate_cpu_devices_if_needed(max(ARGS.mesh), ARGS.cpu)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.parallel import SequenceParallel, make_mesh  # noqa: E402


def model_config(args: argparse.Namespace) -> tuple[ltx_jax.LTXConfig, jnp.dtype]:
    if args.width == "full":
        return ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers), jnp.bfloat16
    tiny = ltx_jax.LTXConfig.tiny(
        num_layers=args.layers,
        num_attention_heads=8,
        attention_head_dim=8,
        audio_num_attention_heads=8,
        audio_attention_head_dim=4,
    )
    return tiny, jnp.float32


def random_modality(
    rng: np.random.Generator, tokens: int, channels: int, context_dim: int, axes: int, dtype: jnp.dtype
) -> ltx_jax.Modality:
    starts = np.repeat(np.arange(tokens, dtype=np.float32)[None, None] / 10, axes, axis=1)
    return ltx_jax.Modality(
        latent=jnp.asarray(rng.standard_normal((1, tokens, channels)), dtype),
        sigma=jnp.ones((1,), jnp.float32),
        timesteps=jnp.ones((1, tokens, 1), jnp.float32),
        positions=jnp.asarray(np.stack([starts, starts + 0.1], axis=-1)),
        context=jnp.asarray(rng.standard_normal((1, 32, context_dim)), dtype),
    )


def median_seconds(fn, repeats: int) -> tuple[object, float]:  # noqa: ANN001
    result = jax.block_until_ready(fn())  # warm-up and compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return result, float(np.median(times))


def exchange(name: str, mesh: Mesh) -> object:
    """The `backend=` SequenceParallel takes for `name` (a BACKENDS key)."""
    if name != "ffi_graph":
        return name
    from ltx_jax.ffi import FfiAllToAll  # noqa: PLC0415 - CUDA builds only

    return FfiAllToAll(mesh, command_buffer=True)


def main(args: argparse.Namespace) -> None:
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind} ({jax.default_backend()})")
    cfg, dtype = model_config(args)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), param_dtype=dtype)
    rng = np.random.default_rng(0)
    video = random_modality(rng, args.tokens, cfg.in_channels, cfg.cross_attention_dim, 3, dtype)
    audio = random_modality(rng, args.audio_tokens, cfg.audio_in_channels, cfg.audio_cross_attention_dim, 1, dtype)
    params = sum(v.size for _, v in nnx.to_flat_state(nnx.state(model, nnx.Param)))
    print(
        f"model: {cfg.num_layers} blocks, {params / 1e6:.1f}M parameters, {jnp.dtype(dtype).name}; "
        f"{args.tokens} video tokens, {args.audio_tokens} audio tokens"
    )

    # jax.jit over the parameter pytree: nnx.jit re-walks the module graph in Python on every call.
    graphdef, state = nnx.split(model)
    single = jax.jit(
        lambda state, v, a: nnx.merge(graphdef, state)(v, a), compiler_options=ltx_jax.DIT_COMPILER_OPTIONS
    )
    reference, single_s = median_seconds(lambda: single(state, video, audio), args.repeats)
    print(f"forward (median of {args.repeats}): one device {single_s * 1e3:.1f} ms")
    for devices in args.mesh:
        mesh = make_mesh(devices)
        for name in args.backend:
            sp = SequenceParallel(model, mesh, backend=exchange(name, mesh))
            output, sp_s = median_seconds(lambda sp=sp: sp(video, audio), args.repeats)
            errors = [
                np.abs(np.asarray(ours, np.float32) - np.asarray(ref, np.float32)).max()
                / np.abs(np.asarray(ref, np.float32)).max()
                for ours, ref in zip(output, reference, strict=True)
            ]
            print(
                f"SP({devices}, {name}) {sp_s * 1e3:.1f} ms, {single_s / sp_s:.2f}x one device; "
                f"max |SP - single| / max |single|: video {errors[0]:.2e}, audio {errors[1]:.2e}"
            )


if __name__ == "__main__":
    try:
        main(ARGS)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
