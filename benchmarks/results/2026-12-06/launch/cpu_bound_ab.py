"""The launcher's bound on CPU devices: four chained forwards of a 24-block tiny DiT on 8 simulated devices,
bound 16 against unbounded (24 blocks: under the 32 that abort), alternating rounds in one process."""

import os
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402 - after the device flags
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.parallel import SequenceParallel, launch, make_mesh  # noqa: E402

UNBOUNDED = 10**9


def modality(tokens: int, channels: int, context_dim: int, axes: int) -> ltx_jax.Modality:
    starts = np.repeat(np.arange(tokens, dtype=np.float32)[None, None], axes, axis=1)
    return ltx_jax.Modality(
        latent=jnp.ones((1, tokens, channels)),
        sigma=jnp.full((1,), 0.8),
        timesteps=jnp.full((1, tokens, 1), 0.8),
        positions=jnp.stack([starts, starts + 1], -1),
        context=jnp.ones((1, 16, context_dim)),
    )


def main() -> None:
    cfg = ltx_jax.LTXConfig.tiny(
        num_layers=24,
        num_attention_heads=8,
        attention_head_dim=8,
        audio_num_attention_heads=8,
        audio_attention_head_dim=4,
    )
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0))
    video = modality(256, cfg.in_channels, cfg.cross_attention_dim, 3)
    audio = modality(32, cfg.audio_in_channels, cfg.audio_cross_attention_dim, 1)
    sp = SequenceParallel(model, make_mesh(8))
    jax.block_until_ready(sp(video, audio))
    times: dict[int, list[float]] = {launch.MAX_IN_FLIGHT: [], UNBOUNDED: []}
    for _ in range(4):
        for bound, values in times.items():
            launch.LAUNCHER.max_in_flight = bound
            start = time.perf_counter()
            jax.block_until_ready([sp(video, audio) for _ in range(4)])
            values.append(time.perf_counter() - start)
    medians = {bound: float(np.median(values)) for bound, values in times.items()}
    print(
        {bound: round(m * 1e3, 1) for bound, m in medians.items()},
        "ratio",
        medians[launch.MAX_IN_FLIGHT] / medians[UNBOUNDED],
    )


if __name__ == "__main__":
    main()
