"""The diffusion video decoder's transformer blocks: neighbourhood attention with absolute RoPE, SwiGLU,
deterministic `NABlock`s, AdaLN-Zero `DiffusionNABlock`s, the pixel-shuffle upsampler.

Source: ltx-core 1.2.0 `model/video_vae/transformer/` (`blocks.py`, `attention.py`, `qkv.py`, `swiglu.py`,
`layers.py`, `rope_math.py`, `det_attn_rope.py`, and the `chunked/` pathway that `DiffVAEMode.CHUNKED_EAGER`,
the default mode, installs). Tensors are channels-last, (B, T, H, W, C), as upstream's. Parameter paths are
upstream's module keys (after its loader split `qkv` into `qkv.to_q/to_k/to_v`).

Stage-5 attention follows `chunked/attn.py` (`_run_w_chunked_residual`): the volume is cut along W into
`w_chunks` slabs of ceil(W / w_chunks) columns, each extended by kw // 2 halo columns on either side, and
each slab is attended on its own (T and H windows shift inward at the borders; the W windows of a slab's own
columns are always centred, on the halo). A halo column is its neighbour's column where the volume has one;
at the volume's left and right edges it repeats the edge column; RoPE positions are global (negative on the
left halo, past W - 1 on the right). `WChunkPlan` reproduces the slab layout exactly, including two quirks of
upstream's loop: a slab narrower than the halo hands the next slab only its own columns as left halo (zeros
beyond them), and where the volume ends inside a slab's right halo (a last slab narrower than the halo) the rest
of that halo repeats the slab's own last column, not the volume's. With the default strides stage 5 is 8 x the
latent's width, i.e. 4 slabs of 2 x, so neither shows for latents at least (kw // 2) / 2 wide (the default
size floor is 7).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from einops import rearrange
from flax import nnx

from ltx_jax.model.normalization import RMSNorm, linear
from ltx_jax.model.video_vae.neighborhood_attention import neighborhood_attention

Kernel = tuple[int, int, int]
ADALN_CHUNKS = 7  # scale_msa, shift_msa, gate_msa, scale_mlp, shift_mlp, gate_mlp, gate_ctx
ROPE_BASE = 10000.0
NORM_EPS = 1e-6


def default_rope_dim_split(head_dim: int) -> tuple[int, int, int]:
    """upstream's `default_rope_dim_split`: head dims given to (T, H, W), each even; 64 -> (16, 24, 24)."""
    if head_dim % 8:
        raise ValueError(f"head_dim={head_dim} must be a multiple of 8 for the default RoPE split.")
    d_t = (head_dim // 4) // 2 * 2
    d_hw = (head_dim - d_t) // 2
    if d_hw % 2:
        d_t -= 2
        d_hw = (head_dim - d_t) // 2
    if d_t <= 0 or d_hw <= 0:
        raise ValueError(f"head_dim={head_dim} is too small for the default RoPE split (got {(d_t, d_hw, d_hw)}).")
    return d_t, d_hw, d_hw


@functools.lru_cache(maxsize=32)
def rope_inv_freqs(dim: int, base: float = ROPE_BASE) -> np.ndarray:
    """(dim // 2,) float32 `1 / base ** (i / dim)` for even i, formed in float64 as upstream's."""
    return (1.0 / np.power(float(base), np.arange(0, dim, 2, dtype=np.float64) / dim)).astype(np.float32)


def _rope_table(positions: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(..., L) positions -> (cos, sin) of shape (..., L, dim // 2): the float32 angle `pos * inv` as upstream
    forms it, its cosine and sine rounded from float64 (host constants, the same on every backend)."""
    angles = positions.astype(np.float32)[..., None] * rope_inv_freqs(dim)
    return np.cos(angles.astype(np.float64)).astype(np.float32), np.sin(angles.astype(np.float64)).astype(np.float32)


def _rotate(x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
    """Interleaved pairs (x[2i], x[2i+1]) of `x` (..., D) rotated by broadcastable (..., D // 2) tables."""
    even, odd = x[..., 0::2].astype(jnp.float32), x[..., 1::2].astype(jnp.float32)
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(x.shape).astype(x.dtype)


def apply_abs_rope(
    x: jax.Array, positions: tuple[np.ndarray, np.ndarray, np.ndarray], split: tuple[int, int, int]
) -> jax.Array:
    """Absolute 3-axis RoPE (upstream's `rot_abs_axis_impl` per axis) on (..., T, H, W, N, hd) heads.

    The first `split[0]` head dims turn with the T position, the next `split[1]` with H, the rest with W.
    `positions`: (T,), (H,), and (W,) or (C, W) for slabs (then x is (B, C, T, H, W, N, hd)).
    """
    d_t, d_h, d_w = split
    t_pos, h_pos, w_pos = positions
    cos_t, sin_t = (a[:, None, None, None, :] for a in _rope_table(t_pos, d_t))  # (T, 1, 1, 1, d_t / 2)
    cos_h, sin_h = (a[:, None, None, :] for a in _rope_table(h_pos, d_h))  # (H, 1, 1, d_h / 2)
    lead = w_pos.shape[:-1]
    w_shape = (*lead, *((1, 1) if lead else ()), w_pos.shape[-1], 1, d_w // 2)  # (W, 1, .) or (C, 1, 1, W, 1, .)
    cos_w, sin_w = (a.reshape(w_shape) for a in _rope_table(w_pos, d_w))
    return jnp.concatenate(
        [
            _rotate(x[..., :d_t], cos_t, sin_t),
            _rotate(x[..., d_t : d_t + d_h], cos_h, sin_h),
            _rotate(x[..., d_t + d_h :], cos_w, sin_w),
        ],
        axis=-1,
    )


def modulate(x: jax.Array, scale: jax.Array, shift: jax.Array) -> jax.Array:
    """AdaLN: `x * (1 + scale) + shift`."""
    return x * (1.0 + scale) + shift


@dataclasses.dataclass(frozen=True)
class WChunkPlan:
    """Where stage-5 attention's W slabs come from (see the module docstring); static, built on the host.

    Attributes:
        source: (C, E) the column of the volume each slab position holds; -1 for a zero column.
        positions: (C, E) float32 RoPE W positions of the slab positions.
        gather: (W,) each output column's index in the slabs laid end to end (slab * E + position).
    """

    source: np.ndarray
    positions: np.ndarray
    gather: np.ndarray

    @classmethod
    def build(cls, width: int, w_chunks: int, halo: int) -> WChunkPlan:
        """The slabs `_run_w_chunked_residual(x, ..., w_chunks, halo)` attends for a volume `width` wide.
        Slabs that would start past the volume (no columns of their own) are left out: they change nothing."""
        chunk = -(-width // w_chunks)
        extent = chunk + 2 * halo
        sources, positions = [], []
        for i in range(w_chunks):
            start, end = i * chunk, min(width, (i + 1) * chunk)
            if end <= start:
                break
            source = np.full(extent, -1)
            taken = min(halo, chunk) if i else halo  # the previous slab hands over at most its own columns
            source[halo - taken : halo] = np.arange(start - taken, start) if i else 0  # slab 0: the edge, repeated
            source[halo : halo + end - start] = np.arange(start, end)
            right = min(width, end + halo) if i + 1 < w_chunks else end
            source[halo + end - start : halo + right - start] = np.arange(end, right)
            source[halo + right - start :] = end - 1  # what is still missing repeats the slab's own last column
            sources.append(source)
            positions.append(np.arange(extent, dtype=np.float32) + (start - halo))
        columns = np.arange(width)
        gather = (columns // chunk) * extent + halo + columns % chunk
        return cls(np.stack(sources), np.stack(positions), gather)

    def slabs(self, x: jax.Array) -> jax.Array:
        """(B, T, H, W, C) -> (B, n_slabs, T, H, E, C)."""
        n_slabs, extent = self.source.shape
        columns = jnp.take(x, np.maximum(self.source, 0).reshape(-1), axis=3)
        columns = jnp.where((self.source >= 0).reshape(-1)[:, None], columns, 0)
        return columns.reshape(*x.shape[:3], n_slabs, extent, x.shape[-1]).transpose(0, 3, 1, 2, 4, 5)

    def columns(self, slabs: jax.Array) -> jax.Array:
        """(B, n_slabs, T, H, E, C) -> (B, T, H, W, C): each column from the slab that owns it."""
        b, n_slabs, t, h, extent, c = slabs.shape
        flat = slabs.transpose(0, 2, 3, 1, 4, 5).reshape(b, t, h, n_slabs * extent, c)
        return jnp.take(flat, self.gather, axis=3)


class QKVProjections(nnx.Module):
    """`to_q`, `to_k`, `to_v`: three (dim -> dim) linears with biases (the file's fused `qkv`, split on load)."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.to_q = linear(dim, dim, rngs=rngs, param_dtype=param_dtype)
        self.to_k = linear(dim, dim, rngs=rngs, param_dtype=param_dtype)
        self.to_v = linear(dim, dim, rngs=rngs, param_dtype=param_dtype)


class NeighborhoodAttention3D(nnx.Module):
    """Multi-head neighbourhood attention: q, k RMS-normed per head, q scaled by hd^-1/2, absolute RoPE."""

    def __init__(
        self,
        dim: int,
        kernel_size: Kernel,
        *,
        head_dim: int,
        rope_dim_split: tuple[int, int, int] | None,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        if dim % head_dim:
            raise ValueError(f"attention width {dim} is not a multiple of head_dim={head_dim}.")
        self.dim, self.head_dim, self.num_heads = dim, head_dim, dim // head_dim
        self.kernel_size = tuple(kernel_size)
        self.rope_dim_split = tuple(rope_dim_split or default_rope_dim_split(head_dim))
        if sum(self.rope_dim_split) != head_dim or any(d % 2 for d in self.rope_dim_split):
            raise ValueError(f"rope_dim_split={self.rope_dim_split} must be even sizes summing to {head_dim}.")
        self.qkv = QKVProjections(dim, rngs=rngs, param_dtype=param_dtype)
        self.proj = linear(dim, dim, rngs=rngs, param_dtype=param_dtype)
        self.q_norm = RMSNorm(head_dim, eps=NORM_EPS, param_dtype=param_dtype)
        self.k_norm = RMSNorm(head_dim, eps=NORM_EPS, param_dtype=param_dtype)

    def heads(
        self, y: jax.Array, positions: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(..., T, H, W, dim) -> q, k, v as (..., T, H, W, N, hd): normed, q scaled, q and k rotated."""
        shape = (*y.shape[:-1], self.num_heads, self.head_dim)
        q = self.q_norm(self.qkv.to_q(y).reshape(shape)) * self.head_dim**-0.5
        k = self.k_norm(self.qkv.to_k(y).reshape(shape))
        q, k = (apply_abs_rope(a, positions, self.rope_dim_split) for a in (q, k))
        return q, k, self.qkv.to_v(y).reshape(shape)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Deterministic stages: (B, T, H, W, dim) -> the same, over the whole volume (positions 0, 1, ...)."""
        b, t, h, w, _ = x.shape
        if t < self.kernel_size[0] or h < self.kernel_size[1] or w < self.kernel_size[2]:
            raise ValueError(
                f"neighbourhood attention needs (T, H, W) >= kernel_size={self.kernel_size}, got {(t, h, w)}; "
                "ltx-core refuses it too (the decoder's size floors pad latents up to it)."
            )
        q, k, v = self.heads(x, (np.arange(t), np.arange(h), np.arange(w)))
        return self.proj(neighborhood_attention(q, k, v, self.kernel_size).reshape(x.shape))

    def chunked(self, y: jax.Array, plan: WChunkPlan) -> jax.Array:
        """Stage 5: (B, n_slabs, T, H, E, dim) modulated slabs -> (B, T, H, W, dim) attention output."""
        b, n_slabs, t, h, extent, _ = y.shape
        q, k, v = self.heads(y, (np.arange(t), np.arange(h), plan.positions))
        flat = [a.reshape(b * n_slabs, t, h, extent, self.num_heads, self.head_dim) for a in (q, k, v)]
        out = neighborhood_attention(*flat, self.kernel_size).reshape(y.shape)
        return plan.columns(self.proj(out))


class SwiGLU(nnx.Module):
    """`w_down(silu(w_gate(x)) * w_up(x))`, no biases; hidden = 4 dim rounded up to a multiple of 16."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype, mlp_ratio: float = 4.0) -> None:
        hidden = (int(dim * mlp_ratio) + 15) // 16 * 16
        self.w_up = linear(dim, hidden, rngs=rngs, param_dtype=param_dtype, bias=False)
        self.w_gate = linear(dim, hidden, rngs=rngs, param_dtype=param_dtype, bias=False)
        self.w_down = linear(hidden, dim, rngs=rngs, param_dtype=param_dtype, bias=False)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.w_down(jax.nn.silu(self.w_gate(x)) * self.w_up(x))


class NABlock(nnx.Module):
    """Deterministic stages: `x + attn(norm1(x))`, then `+ mlp(norm2(x))`, on (B, T, H, W, dim)."""

    def __init__(
        self, dim: int, kernel_size: Kernel, *, head_dim: int, rope_dim_split: tuple[int, int, int] | None,
        rngs: nnx.Rngs, param_dtype: jnp.dtype,
    ) -> None:  # fmt: skip
        self.norm1 = RMSNorm(dim, eps=NORM_EPS, param_dtype=param_dtype)
        self.attn = NeighborhoodAttention3D(
            dim, kernel_size, head_dim=head_dim, rope_dim_split=rope_dim_split, rngs=rngs, param_dtype=param_dtype
        )
        self.norm2 = RMSNorm(dim, eps=NORM_EPS, param_dtype=param_dtype)
        self.mlp = SwiGLU(dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DiffusionNABlock(nnx.Module):
    """Stage 5 (upstream's `ChunkedDiffusionNABlock`): `x + context_proj(context)`, then the W-chunked attention
    residual and the SwiGLU residual, each on `modulate(norm(x))` with the shared AdaLN plus this block's
    `scale_shift_table` (no gates: the file's static gates are folded into the linears on load)."""

    def __init__(
        self, dim: int, kernel_size: Kernel, context_channels: int, *, head_dim: int,
        rope_dim_split: tuple[int, int, int] | None, rngs: nnx.Rngs, param_dtype: jnp.dtype,
    ) -> None:  # fmt: skip
        self.context_proj = linear(context_channels, dim, rngs=rngs, param_dtype=param_dtype)
        self.scale_shift_table = nnx.Param(jnp.zeros((ADALN_CHUNKS, dim), param_dtype))
        self.norm1 = RMSNorm(dim, eps=NORM_EPS, param_dtype=param_dtype)
        self.attn = NeighborhoodAttention3D(
            dim, kernel_size, head_dim=head_dim, rope_dim_split=rope_dim_split, rngs=rngs, param_dtype=param_dtype
        )
        self.norm2 = RMSNorm(dim, eps=NORM_EPS, param_dtype=param_dtype)
        self.mlp = SwiGLU(dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array, context: jax.Array, modulation: jax.Array, plan: WChunkPlan) -> jax.Array:
        """x: (B, T, H, W, dim); context: (B, T, H, W, context_channels); modulation: (B, 7, dim)."""
        ada = modulation + self.scale_shift_table[...].astype(x.dtype)[None]
        scale_msa, shift_msa, scale_mlp, shift_mlp = (ada[:, i, None, None, None, :] for i in (0, 1, 3, 4))
        x = x + self.context_proj(context)
        slabs = modulate(self.norm1(plan.slabs(x)), scale_msa[:, None], shift_msa[:, None])
        x = x + self.attn.chunked(slabs, plan)
        return x + self.mlp(modulate(self.norm2(x), scale_mlp, shift_mlp))


class LinearPixelShuffleUpsample(nnx.Module):
    """Linear to prod(stride) * C_out channels, then depth-to-space; a time x2 drops the leading frame."""

    def __init__(
        self, in_channels: int, stride: Kernel, reduction: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype
    ) -> None:
        self.stride = tuple(stride)
        self.out_channels = in_channels // reduction
        self.proj = linear(in_channels, int(np.prod(stride)) * self.out_channels, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array, drop_leading_frame: bool = True) -> jax.Array:
        """(B, T, H, W, C) -> (B, T s_t [- 1], H s_h, W s_w, C_out). The duplicated first frame of a time x2 is
        dropped when `drop_leading_frame` (the volume holds the video's first frame: always, untiled)."""
        p1, p2, p3 = self.stride
        x = rearrange(self.proj(x), "b t h w (c p1 p2 p3) -> b (t p1) (h p2) (w p3) c", p1=p1, p2=p2, p3=p3)
        return x[:, 1:] if p1 == 2 and drop_leading_frame else x


class AdaLNZero(nnx.Module):
    """Shared stage-5 modulation: (B, t_emb_dim) -> (B, 7, dim), `proj(silu(t_emb))` in 7 chunks."""

    def __init__(self, dim: int, t_emb_dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype) -> None:
        self.proj = linear(t_emb_dim, ADALN_CHUNKS * dim, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, t_emb: jax.Array) -> jax.Array:
        return self.proj(jax.nn.silu(t_emb)).reshape(t_emb.shape[0], ADALN_CHUNKS, -1)
