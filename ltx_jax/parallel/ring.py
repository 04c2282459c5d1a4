"""Ring attention, alone on a 1-D mesh ("ring") or inside a Ulysses head exchange on a 2-D mesh ("usp").

Runs inside `jax.shard_map`. Ring: device `r` keeps its query block and, for `R` steps, attends to
the K/V block it holds while passing that block on to device `r + 1` (`lax.ppermute`); the partial
results are merged with the online softmax of `ltx_jax.parallel.blockwise` in float32. The
per-block attention is `block_attention`: cuDNN flash attention with its log-sum-exp on GPU, XLA
attention with scores materialized on CPU (`SequenceParallel(..., ring_kernel=...)`). The loop is
unrolled and each step's `ppermute` is issued before its attention, so XLA can overlap the transfer
of the next block with the current block's compute.

USP (yunchang / xDiT): the tokens are split over `("ring", "ulysses")`. An all-to-all inside the
"ulysses" axis first trades "my T/n tokens x all heads" for "my ring block of T/R tokens x H/U heads",
then the ring runs over the "ring" axis with those heads, then the heads are traded back.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from ltx_jax.model.attention_backends import BlockAttentionFn, as_bias4d, attention_with_lse, merge_heads, split_heads
from ltx_jax.parallel.blockwise import merge_across, merge_partial
from ltx_jax.parallel.exchange import AllToAll, gather_heads, lax_all_to_all, send_heads
from ltx_jax.parallel.layout import bias_block, uniform_masked_rows


@dataclasses.dataclass(frozen=True)
class RingAttention:
    """The attention functions SequenceParallel injects for `attn1` and `video_to_audio_attn`.

    Attributes:
        ring_axis: the mesh axis K/V blocks rotate along ("sp" for "ring", "ring" for "usp").
        ring_size: devices on `ring_axis` (R).
        valid_tokens: the caller's video token count; keys past it are padding.
        padded_tokens: the video token count after padding to a multiple of the device count.
        ulysses_axis: the head-exchange axis of "usp" (None for plain ring).
        ulysses_size: devices on `ulysses_axis` (U; 1 for plain ring).
        all_to_all: the head-exchange backend of "usp".
        block_attention: the per-block attention returning the log-sum-exp
            (`ltx_jax.model.attention_backends.block_attention_backend`).
    """

    ring_axis: str
    ring_size: int
    valid_tokens: int
    padded_tokens: int
    ulysses_axis: str | None = None
    ulysses_size: int = 1
    all_to_all: AllToAll = lax_all_to_all
    block_attention: BlockAttentionFn = attention_with_lse

    @property
    def block(self) -> int:
        """Tokens per ring block: T / R."""
        return self.padded_tokens // self.ring_size

    def _my_heads(self, x: jax.Array, heads: int) -> jax.Array:
        """`(..., H, D)` -> this device's `(..., H/U, D)` along the ulysses axis."""
        if self.ulysses_axis is None:
            return x
        local = heads // self.ulysses_size
        return lax.dynamic_slice_in_dim(x, lax.axis_index(self.ulysses_axis) * local, local, axis=-2)

    def _send_heads(self, x: jax.Array) -> jax.Array:
        """`(..., T/n, H, D)` -> `(..., T/R, H/U, D)`: my ring block, my heads."""
        return x if self.ulysses_axis is None else send_heads(x, self.all_to_all, self.ulysses_axis)

    def _key_lengths(self, source: jax.Array, batch_size: int) -> jax.Array | None:
        """`(B,)` real keys of the block that started on ring device `source` (the pad keys are the
        last of the whole sequence, so a block's real keys are a prefix); None without padding."""
        if self.valid_tokens == self.padded_tokens:
            return None
        real = jnp.clip(self.valid_tokens - source * self.block, 0, self.block)
        return jnp.full((batch_size,), real, jnp.int32)

    def ring(self, q: jax.Array, kv: jax.Array, bias: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """`q` `(B, T/R, h, D)` over every ring block: `kv` `(2, B, T/R, h, D)` is this device's K/V block,
        `bias` the caller's bias for these query rows and all T keys. -> `out` (float32; the kernel's
        dtype when R = 1), `lse` float32."""
        rank = lax.axis_index(self.ring_axis)
        forward = [(i, (i + 1) % self.ring_size) for i in range(self.ring_size)]
        out = lse = None
        for step in range(self.ring_size):
            # Issued before this step's attention, so the transfer can overlap it.
            incoming = lax.ppermute(kv, self.ring_axis, forward) if step < self.ring_size - 1 else None
            source = (rank - step) % self.ring_size
            part = self.block_attention(
                q,
                kv[0],
                kv[1],
                bias=bias_block(bias, source * self.block, self.block, axis=-1),
                key_lengths=self._key_lengths(source, q.shape[0]),
            )
            out, lse = part if out is None else merge_partial(out, lse, *part)
            kv = incoming
        return out, lse

    def video_self_attention(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Local `(B, T/n, H*D)` q/k/v (already normed and rotated) -> local `(B, T/n, H*D)`.

        `mask` is the caller's padded `(B, 1, T|1, T)` bias or None; it is cut to this device's query
        rows and, each step, to the key block at hand. Pad keys are removed by per-block key lengths.
        """
        qkv = self._send_heads(jnp.stack([split_heads(t, heads) for t in (q, k, v)]))
        bias = as_bias4d(mask)
        if bias is not None and bias.shape[1] != 1:
            raise ValueError(f"ring attention takes a mask shared by all heads (B, 1, T, T); got {mask.shape}.")
        bias = bias_block(bias, lax.axis_index(self.ring_axis) * self.block, self.block, axis=-2)
        q_block, bias = uniform_masked_rows(qkv[0], bias, self.valid_tokens)
        out, _ = self.ring(q_block, qkv[1:], bias)
        out = out.astype(q.dtype)
        if self.ulysses_axis is not None:
            out = gather_heads(out, self.all_to_all, self.ulysses_axis)
        return merge_heads(out)

    def video_to_audio(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Replicated audio queries `(B, T_a, H*D)` over local video keys/values `(B, T/n, H*D)`.

        Each device attends (its heads of) the audio queries to its ring block of video keys, the
        partial results are merged across the ring axis (one max and one sum all-reduce of audio-sized
        data, cheaper than rotating video K/V), and with USP the heads are all-gathered.
        """
        if mask is not None:
            raise ValueError("video-to-audio attention takes no mask in LTX-2; got one.")
        q_heads = self._my_heads(split_heads(q, heads), heads)
        kv = self._send_heads(jnp.stack([split_heads(k, heads), split_heads(v, heads)]))
        lengths = self._key_lengths(lax.axis_index(self.ring_axis), q.shape[0])
        part = self.block_attention(q_heads, kv[0], kv[1], key_lengths=lengths)
        out = merge_across(*part, self.ring_axis).astype(q.dtype)
        if self.ulysses_axis is not None:
            out = lax.all_gather(out, self.ulysses_axis, axis=-2, tiled=True)
        return merge_heads(out)
