"""Norms of the DiT: weightless and learned RMSNorm, and the output LayerNorm.

Source: `ltx_core/utils.py::rms_norm`, `torch.nn.RMSNorm`, `torch.nn.LayerNorm(elementwise_affine=False)`.
All of them compute in float32 and return the input dtype, because torch upcasts half-precision
inputs the same way inside `rms_norm` and `layer_norm`.
"""

import jax
import jax.numpy as jnp
from flax import nnx


def rms_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """`x / rms(x)` over the last axis, computed in float32; returns `x.dtype`."""
    xf = x.astype(jnp.float32)
    return (xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)).astype(x.dtype)


def layer_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """Mean-subtracting LayerNorm without affine parameters, computed in float32."""
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    return ((xf - mean) * jax.lax.rsqrt(var + eps)).astype(x.dtype)


class RMSNorm(nnx.Module):
    """Learned RMSNorm (`torch.nn.RMSNorm`), parameter named `weight` as in the checkpoint."""

    def __init__(self, dim: int, *, eps: float = 1e-6, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.eps = eps
        self.weight = nnx.Param(jnp.ones((dim,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        # torch multiplies the weight after casting the normalized value back to the input dtype.
        return rms_norm(x, self.eps) * self.weight[...].astype(x.dtype)


class Identity(nnx.Module):
    """Stands where ltx-core has `torch.nn.Identity`, so indices like `to_out.0` and `ff.net.2` line up."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return x


def linear(
    in_features: int, out_features: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype, bias: bool = True
) -> nnx.Linear:
    """A Linear layer; `load_state_dict` maps its `kernel` to the checkpoint's transposed `weight`."""
    return nnx.Linear(in_features, out_features, use_bias=bias, param_dtype=param_dtype, rngs=rngs)
