"""The same cuDNN flash-attention kernel, called by JAX and by torch SDPA, for `ncu` to compare.

    ncu --clock-control none --kernel-name regex:sdpa --section LaunchStats --section SpeedOfLight \\
        python benchmarks/probe_cudnn_attention.py --batch 1 --tokens 6144 --heads 4

Both frameworks end up in `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_*`
(benchmarks/profile_step.py), yet JAX's call measured slower (benchmarks/results/2026-11-29/README.md,
"Attention at the shard shapes, measured fairly"). This runs each twice on random bf16 inputs, JAX
first, so ncu's launches 0-1 are JAX's and 2-3 torch's.
"""

import argparse
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # entry point: share the GPU with torch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=6144)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=128)
    args = parser.parse_args()
    shape = (args.batch, args.tokens, args.heads, args.head_dim)
    q, k, v = (jax.random.normal(key, shape, jnp.bfloat16) for key in jax.random.split(jax.random.key(0), 3))
    attention = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="cudnn"))
    for _ in range(2):
        jax.block_until_ready(attention(q, k, v))
    tq, tk, tv = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
    for _ in range(2):
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    torch.cuda.synchronize()
    print(f"ran {shape} twice in each framework")


if __name__ == "__main__":
    main()
