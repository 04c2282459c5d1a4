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
    """`GaussianNoiser`: `noise * m + latent * (1 - m)` with `m = denoise_mask * noise_scale`.

    `noise` is drawn by the caller (`stages.py`: float32 `jax.random.normal` cast to the latent dtype)
    so that one seed gives the same noise on any mesh and in any process.
    """
    scaled_mask = state.denoise_mask.astype(jnp.float32) * noise_scale
    latent = noise * scaled_mask + state.latent * (1 - scaled_mask)
    return state.replace(latent=latent.astype(state.latent.dtype))
