"""The Euler step on x0 predictions, the conditioning blend, and the Gaussian noiser.

Sources: `ltx_core/components/diffusion_steps.py::EulerDiffusionStep`, `ltx_core/utils.py::to_velocity`,
`ltx_pipelines/utils/helpers.py::post_process_latent`, `ltx_core/components/noisers.py::GaussianNoiser`.
Arithmetic in float32, results in the latent's dtype, in the reference's operation order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ltx_jax.pipeline.types import LatentState


def euler_step(sample: jax.Array, denoised: jax.Array, sigma: jax.Array, sigma_next: jax.Array) -> jax.Array:
    """`x + (x - x0) / sigma * (sigma_next - sigma)`: the velocity is rounded to the sample dtype first."""
    f32 = jnp.float32
    sigma, sigma_next = jnp.asarray(sigma, f32), jnp.asarray(sigma_next, f32)
    velocity = ((sample.astype(f32) - denoised.astype(f32)) / sigma).astype(sample.dtype)
    return (sample.astype(f32) + velocity.astype(f32) * (sigma_next - sigma)).astype(sample.dtype)


def post_process_latent(denoised: jax.Array, denoise_mask: jax.Array, clean: jax.Array) -> jax.Array:
    """Keeps the conditioning: `denoised * mask + clean * (1 - mask)`, in float32."""
    mask = denoise_mask.astype(jnp.float32)
    return (denoised.astype(jnp.float32) * mask + clean.astype(jnp.float32) * (1 - mask)).astype(denoised.dtype)


def add_noise(state: LatentState, noise: jax.Array, noise_scale: float | jax.Array = 1.0) -> LatentState:
    """`GaussianNoiser`: `lerp(clean, lerp(latent, noise, noise_scale), denoise_mask)` in float32: the
    generated tokens move `noise_scale` of the way to the noise, conditioned ones (mask 0) are the clean
    latent, and a mask between keeps that share of the clean latent.

    `noise` is drawn by the caller (`stages.py`: float32 `jax.random.normal` cast to the latent dtype)
    so that one seed gives the same noise on any mesh and in any process.
    """
    f32 = jnp.float32
    noised = _lerp(state.latent.astype(f32), noise.astype(f32), noise_scale)
    latent = _lerp(state.clean_latent.astype(f32), noised, state.denoise_mask.astype(f32))
    return state.replace(latent=latent.astype(state.latent.dtype))


def _lerp(start: jax.Array, end: jax.Array, weight: float | jax.Array) -> jax.Array:
    """`torch.lerp`, rounding as it does: from `start` for weights below 0.5, from `end` above."""
    weight = jnp.asarray(weight, jnp.float32)
    return jnp.where(jnp.abs(weight) < 0.5, start + weight * (end - start), end - (end - start) * (1 - weight))
