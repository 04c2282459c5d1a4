"""Decoding a 1536x1024x121 video and writing its mp4: one after the other, or interleaved chunk by chunk
(`VideoDecoding.chunks` into `write_mp4_chunks`), with x264's own thread count or fewer (issue #20).

    python benchmarks/bench_mp4_overlap.py CHECKPOINT.safetensors --repeats 2

The video decoder of the checkpoint (bf16), a random latent (the frames are noise, as a random-weight
DiT's are), compiled first. Each repeat runs every variant once, in turn; printed: each run's seconds.
"""

import argparse
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.parallel import make_mesh
from ltx_jax.pipeline.components import decoder_modules
from ltx_jax.pipeline.decoders import decoder_callables
from ltx_jax.pipeline.media_io import write_mp4, write_mp4_chunks
from ltx_jax.pipeline.model_ledger import checkpoint_tensors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--latent", type=int, nargs=3, default=[16, 32, 48], help="latent frames, height, width")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    tensors, config = checkpoint_tensors(args.checkpoint)
    video_decoder, _, _ = decoder_modules(config, tensors, 0, jnp.bfloat16)
    decoding, _ = decoder_callables(video_decoder, *decoder_modules(config, None, 0, jnp.bfloat16)[1:], make_mesh(1))
    shape = (1, video_decoder.latent_channels, *args.latent)
    latent = jax.device_put(jax.random.normal(jax.random.key(0), shape, jnp.bfloat16), decoding.device)
    decoding.compile_ahead(shape, jnp.bfloat16)
    fewer = max(1, (os.cpu_count() or 2) - 2)
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "out.mp4")
    frames = decoding(latent, 0)  # warm-up; also the frames the encode-only run writes
    variants = {
        "encode only": lambda: write_mp4(path, frames, 24.0),
        "decode, then encode": lambda: write_mp4(path, decoding(latent, 0), 24.0),
        "interleaved": lambda: write_mp4_chunks(path, decoding.chunks(latent, 0), 24.0),
        f"interleaved, x264 on {fewer} threads": lambda: write_mp4_chunks(
            path, decoding.chunks(latent, 0), 24.0, threads=fewer
        ),
    }
    print(f"{frames.shape[0]} frames {frames.shape[2]}x{frames.shape[1]}, chunks of",
          [c.shape[0] for c in decoding.chunks(latent, 0)], f"frames, {os.cpu_count()} cores")  # fmt: skip
    results = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            results[name].append(time.perf_counter() - start)
    for name, seconds in results.items():
        print(f"{name}: {', '.join(f'{s:.2f}' for s in seconds)} s (median {np.median(seconds):.2f})")


if __name__ == "__main__":
    main()
