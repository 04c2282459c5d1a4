"""Ulysses attention: trade "my tokens x all heads" for "all tokens x my heads", attend, trade back.

Source: ltx-core's `multigpu/transformer/attention.py` (All2AllAttention, AudioAll2AllAttention).
Runs inside `jax.shard_map` over the sequence axis; video tokens are split contiguously, so after
the exchange every device holds the whole padded sequence with the pad keys at the end.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from ltx_jax.model.attention_backends import LocalAttentionFn, merge_heads, split_heads
from ltx_jax.parallel.exchange import AllToAll, gather_heads, send_heads
from ltx_jax.parallel.layout import key_lengths


@dataclasses.dataclass(frozen=True)
class UlyssesAttention:
    """The attention functions SequenceParallel injects for `attn1` and `video_to_audio_attn`.

    Attributes:
        local: attention over the gathered sequence; must take `key_value_seq_lengths`.
        all_to_all: the head-exchange backend.
        axis_name: the mesh axis the video tokens are split over.
        mesh_size: devices on that axis.
        valid_tokens: the caller's video token count; keys past it are padding.
        padded_tokens: the video token count after padding to a multiple of `mesh_size`.
    """

    local: LocalAttentionFn
    all_to_all: AllToAll
    axis_name: str
    mesh_size: int
    valid_tokens: int
    padded_tokens: int

    def _key_lengths(self, batch_size: int) -> jax.Array | None:
        return key_lengths(self.valid_tokens, self.padded_tokens, batch_size)

    def video_self_attention(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Local `(B, T_local, H*D)` q/k/v (already normed and rotated) -> local `(B, T_local, H*D)`.

        `mask` is the caller's padded `(B, 1, T, T)` bias or None. Pad keys are removed by key
        length either way (O(T), no dense mask of our own), so they weigh exactly zero even in
        rows the caller masked completely.
        """
        local_heads = heads // self.mesh_size
        qkv = send_heads(jnp.stack([split_heads(t, heads) for t in (q, k, v)]), self.all_to_all, self.axis_name)
        lengths = self._key_lengths(q.shape[0])
        out = self.local(*(merge_heads(t) for t in qkv), heads=local_heads, mask=mask, key_value_seq_lengths=lengths)
        return merge_heads(gather_heads(split_heads(out, local_heads), self.all_to_all, self.axis_name))

    def video_to_audio(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Replicated audio queries `(B, T_a, H*D)` over local video keys/values `(B, T_local, H*D)`.

        Each device attends with its own heads of the queries over all video tokens, then the
        heads are all-gathered. Padded video keys are masked (upstream leaks them into the audio).
        """
        if mask is not None:
            raise ValueError("video-to-audio attention takes no mask in LTX-2; got one.")
        local_heads = heads // self.mesh_size
        rank = lax.axis_index(self.axis_name)
        q_local = lax.dynamic_slice_in_dim(split_heads(q, heads), rank * local_heads, local_heads, axis=-2)
        kv = send_heads(jnp.stack([split_heads(k, heads), split_heads(v, heads)]), self.all_to_all, self.axis_name)
        out = self.local(
            merge_heads(q_local),
            merge_heads(kv[0]),
            merge_heads(kv[1]),
            heads=local_heads,
            key_value_seq_lengths=self._key_lengths(q.shape[0]),
        )
        return merge_heads(lax.all_gather(split_heads(out, local_heads), self.axis_name, axis=-2, tiled=True))
