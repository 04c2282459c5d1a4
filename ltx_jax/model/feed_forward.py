"""Feed-forward: `Linear(D, 4D) -> GELU(tanh) -> Linear(4D, D)`.

Source: `ltx_core/model/transformer/feed_forward.py`, `gelu_approx.py`. The module layout mirrors
the checkpoint keys `ff.net.0.proj` and `ff.net.2` (`net.1` is an Identity).
"""

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import Identity, linear


class GELUApprox(nnx.Module):
    def __init__(self, dim_in: int, dim_out: int, *, bias: bool, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.proj = linear(dim_in, dim_out, bias=bias, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.gelu(self.proj(x), approximate=True)


class FeedForward(nnx.Module):
    def __init__(
        self, dim: int, dim_out: int, *, mult: int = 4, bias: bool = True, rngs: nnx.Rngs, param_dtype: jnp.dtype
    ) -> None:
        inner_dim = dim * mult
        self.net = nnx.List(
            [
                GELUApprox(dim, inner_dim, bias=bias, rngs=rngs, param_dtype=param_dtype),
                Identity(),
                linear(inner_dim, dim_out, bias=bias, rngs=rngs, param_dtype=param_dtype),
            ]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.net:
            x = layer(x)
        return x
