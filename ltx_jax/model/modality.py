"""`Modality`: one stream's inputs to the DiT (video or audio).

Source: `ltx_core/model/transformer/modality.py`. Same fields and shapes; registered as a JAX
pytree (`enabled` is static) so it passes through `jit` and `shard_map`.
"""

import dataclasses

import jax


@dataclasses.dataclass(frozen=True)
class Modality:
    """Inputs of one modality. Shapes as the ltx-pipelines pass them:

    Attributes:
        latent: `(B, T, C)` patchified latent tokens (noisy and conditioning).
        sigma: `(B,)` noise level per sample; drives the prompt AdaLN and the other modality's
            cross-attention gate.
        timesteps: `(B, T, 1)` per-token timesteps (`denoise_mask * sigma`), or `(B, 1, 1)` one per
            sample (the pipelines pass it where every token is generated: AdaLN runs once per sample);
            `(B, T)` and `(B, 1)` also work.
        positions: `(B, 3, T, 2)` video or `(B, 1, T, 2)` audio `[start, end)` bounds per axis
            (time in seconds, height/width in pixels).
        context: `(B, S, D_ctx)` text embeddings.
        enabled: False skips this modality's blocks (its inputs are still preprocessed).
        context_mask: optional `(B, S)` bool/int text mask (1 = attend).
        attention_mask: optional `(B, T, T)` self-attention strengths in [0, 1] (or broadcast
            `(1, 1, T)` / `(B, 1, T)`); 0 masks, fractions become a log-bias.
        keyframes_mask: optional `(B, T, 1)`; nonzero tokens get the keyframe embedding (models
            built with `use_keyframes_abs_pos_embedding`).
    """

    latent: jax.Array
    sigma: jax.Array
    timesteps: jax.Array
    positions: jax.Array
    context: jax.Array
    enabled: bool = True
    context_mask: jax.Array | None = None
    attention_mask: jax.Array | None = None
    keyframes_mask: jax.Array | None = None


jax.tree_util.register_dataclass(
    Modality,
    data_fields=[
        "latent",
        "sigma",
        "timesteps",
        "positions",
        "context",
        "context_mask",
        "attention_mask",
        "keyframes_mask",
    ],
    meta_fields=["enabled"],
)
