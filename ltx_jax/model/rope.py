"""Rotary position embeddings over fractional `[start, end)` positions, split or interleaved.

Source: `ltx_core/model/transformer/rope.py`.

Angles reach `pi/2 * theta` (about 15708 rad), where one float32 ulp of a grid frequency moves cos
and sin by 1e-3. The frequency grid is therefore built on the host, reproducing torch's float32
`linspace` bit for bit; the angle arithmetic then uses the same float32 operations as ltx-core.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.config import RopeType

PositionalEmbedding = tuple[jax.Array, jax.Array]  # (cos, sin)


def _torch_linspace_01(steps: int) -> np.ndarray:
    """`torch.linspace(0, 1, steps, dtype=float32)` on CPU, bit for bit.

    torch fills the first half as `fma(step, i, 0)` and the second half as
    `fma(-step, steps - 1 - i, 1)` with `step = float32(1) / float32(steps - 1)`; an fma is one
    float64 product-and-sum (exact here) rounded once to float32.
    """
    if steps == 1:
        return np.zeros(1, np.float32)
    step = np.float64(np.float32(1) / np.float32(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    first = step * i
    second = 1.0 - step * (steps - 1 - i)
    return np.where(i < steps // 2, first, second).astype(np.float32)


@functools.lru_cache(maxsize=16)
def freq_grid(theta: float, n_axes: int, dim: int, double_precision: bool) -> np.ndarray:
    """`theta ** linspace(0, 1, dim // (2 * n_axes)) * pi / 2` as float32, shape `(F,)`.

    `double_precision=True` is ltx-core's `generate_freq_grid_np` (float64 throughout, then cast),
    exact. `False` is `generate_freq_grid_pytorch`: the same float32 exponents, with the power
    rounded correctly from float64. torch's own float32 power is vectorized and hardware dependent;
    it agrees with this to within 2 ulp (bit for bit at every width the tests use).
    """
    count = dim // (2 * n_axes)
    if double_precision:
        exponents = np.linspace(0.0, 1.0, count, dtype=np.float64)
        return (np.power(theta, exponents) * math.pi / 2).astype(np.float32)
    powers = np.power(np.float64(theta), _torch_linspace_01(count).astype(np.float64)).astype(np.float32)
    return powers * np.float32(math.pi) / np.float32(2)


def _rope_angles(
    positions: jax.Array,
    dim: int,
    theta: float,
    max_pos: tuple[int, ...],
    use_middle_indices_grid: bool,
    double_precision: bool,
) -> jax.Array:
    """`(B, n_axes, T[, 2])` positions -> `(B, T, F * n_axes)` angles, frequency-major."""
    n_axes = positions.shape[1]
    if n_axes != len(max_pos):
        raise ValueError(
            f"positions have {n_axes} axes but max_pos has {len(max_pos)} entries ({list(max_pos)}); "
            "video positions are (B, 3, T, 2), audio positions (B, 1, T, 2)."
        )
    positions = positions.astype(jnp.float32)
    if use_middle_indices_grid:
        if positions.ndim != 4 or positions.shape[-1] != 2:
            raise ValueError(
                f"positions must be (B, n_axes, T, 2) [start, end) bounds with use_middle_indices_grid, "
                f"got shape {positions.shape}."
            )
        grid = (positions[..., 0] + positions[..., 1]) / 2.0
    else:
        grid = positions[..., 0] if positions.ndim == 4 else positions
    fractional = jnp.stack([grid[:, i] / max_pos[i] for i in range(n_axes)], axis=-1)  # (B, T, n_axes)
    freqs = jnp.asarray(freq_grid(theta, n_axes, dim, double_precision))
    angles = freqs * (fractional[..., None] * 2 - 1)  # (B, T, n_axes, F)
    return jnp.swapaxes(angles, -1, -2).reshape(*angles.shape[:2], -1)


def precompute_freqs_cis(
    positions: jax.Array,
    *,
    dim: int,
    out_dtype: jnp.dtype,
    theta: float,
    max_pos: tuple[int, ...],
    use_middle_indices_grid: bool,
    num_attention_heads: int,
    rope_type: RopeType,
    double_precision: bool,
) -> PositionalEmbedding:
    """Positions -> (cos, sin) tables in `out_dtype`, as ltx-core casts them to the activation dtype.

    Shapes: split `(B, T, num_attention_heads, dim // (2 * heads))` (token-major, unlike ltx-core's
    head-major layout, so sequence sharding leaves it local); interleaved `(B, T, dim)`.
    Split pads the front of the frequency axis (cos=1, sin=0) to `dim // 2` entries, interleaved pads
    `dim % (2 * n_axes)` entries after repeating each frequency twice.
    """
    angles = _rope_angles(positions, dim, theta, max_pos, use_middle_indices_grid, double_precision)
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    if rope_type == "split":
        pad = dim // 2 - angles.shape[-1]
        if dim // 2 % num_attention_heads:
            raise ValueError(f"RoPE dim/2 ({dim // 2}) must be divisible by the head count ({num_attention_heads}).")
    else:
        cos, sin = jnp.repeat(cos, 2, axis=-1), jnp.repeat(sin, 2, axis=-1)
        pad = dim % (2 * positions.shape[1])
    pad_width = [(0, 0), (0, 0), (pad, 0)]
    cos = jnp.pad(cos, pad_width, constant_values=1.0)
    sin = jnp.pad(sin, pad_width, constant_values=0.0)
    if rope_type == "split":
        cos = cos.reshape(*cos.shape[:2], num_attention_heads, -1)
        sin = sin.reshape(*sin.shape[:2], num_attention_heads, -1)
    return cos.astype(out_dtype), sin.astype(out_dtype)


def apply_rotary_emb(x: jax.Array, pe: PositionalEmbedding, rope_type: RopeType) -> jax.Array:
    """Rotates `(B, T, inner)` queries or keys by a (cos, sin) table from `precompute_freqs_cis`."""
    cos, sin = pe
    if rope_type == "split":
        b, t, heads, half = cos.shape
        # Like ltx-core, the head grouping comes from the table, which may differ from the
        # attention's own head count in the audio-video cross-attention.
        halves = x.reshape(b, t, heads, 2, half)
        # (x1 cos - x2 sin, x2 cos + x1 sin) as one elementwise expression over both halves, the
        # halves swapped and signed (-x2, x1). A stack of the two results compiles to a concatenate
        # fusion on GPU; this saved ~0.5 ms of kernel time per 8-block forward at 6,144 tokens, the
        # forward within noise (benchmarks/results/2026-11-29/README.md, "Optimization pass"). Same arithmetic.
        signed_swap = halves[..., ::-1, :] * jnp.asarray([-1, 1], x.dtype)[:, None]
        out = halves * cos[..., None, :] + signed_swap * sin[..., None, :]
        return out.reshape(x.shape)
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    rotated = jnp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
    return x * cos + rotated * sin
