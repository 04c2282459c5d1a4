"""Compile and run time of the video and audio decoding of a 1536x1024x121 video, as generate.py decodes.

    python benchmarks/bench_decode_compile.py                      # LTX-2.3 configs, random weights
    XLA_FLAGS=--xla_gpu_autotune_level=0 python benchmarks/bench_decode_compile.py   # without autotuning
    python benchmarks/bench_decode_compile.py --tiny               # the --tiny synthetic configs (CPU check)
    XLA_FLAGS=--xla_gpu_autotune_level=0 python benchmarks/bench_decode_compile.py --only audio

The decoders come from the synthetic checkpoint's config (`scripts/make_synthetic_checkpoint.py`) with
random weights, through `pipeline.decoders.decoder_callables` on a one-device mesh (the video in the
reference's tiles). Per decoder: the first call (compiling and running, no persistent cache), then the
median of three more, and the process's peak device memory after each first call.
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from make_synthetic_checkpoint import checkpoint_config  # noqa: E402

from ltx_jax.parallel import make_mesh  # noqa: E402
from ltx_jax.pipeline.components import decoder_modules  # noqa: E402
from ltx_jax.pipeline.decoders import decoder_callables  # noqa: E402


def peak_gib() -> float:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use", 0) / 2**30


def timed(fn: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny configs and latents, to check the script")
    parser.add_argument("--only", choices=["video", "audio"], help="one decoder (the other is built, not run)")
    args = parser.parse_args()
    config = checkpoint_config(tiny=args.tiny)
    start = time.perf_counter()
    modules = decoder_modules(config, None, 0, jnp.bfloat16)
    decode_video, decode_audio = decoder_callables(*modules, mesh=make_mesh(1))
    print(
        f"{jax.devices()[0].device_kind}; jax {jax.__version__}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; "
        f"decoders built in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    channels = config["vae"].get("latent_channels", 128)
    audio = config["audio_vae"]["model"]["params"]["ddconfig"]
    frames, height, width, audio_frames = (2, 4, 6, 8) if args.tiny else (16, 32, 48, 126)
    video_latent = jax.random.normal(jax.random.key(0), (1, channels, frames, height, width), jnp.bfloat16)
    audio_latent = jax.random.normal(jax.random.key(1), (1, audio.get("z_channels", 8), audio_frames, 16), jnp.float32)
    for name, fn, inputs in (("video", decode_video, (video_latent, 0)), ("audio", decode_audio, (audio_latent,))):
        if args.only not in (None, name):
            continue
        first = timed(fn, *inputs)
        peak = peak_gib()
        warm = statistics.median(timed(fn, *inputs) for _ in range(3))
        print(
            f"{name} decoding: first call {first:6.2f} s, then {warm:6.2f} s; peak after the first {peak:.1f} GiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
