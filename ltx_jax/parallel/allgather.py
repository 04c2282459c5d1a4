"""All-gather-KV attention: every device keeps its own queries and gathers every key and value.

Runs inside `jax.shard_map` over the 1-D "sp" axis. Any head count works (no head exchange); the
price is a full `(2, B, T, H*D)` K/V on every device per attention and `(n - 1) / n` of it received.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from ltx_jax.model.attention_backends import LocalAttentionFn, as_bias4d
from ltx_jax.parallel.layout import bias_block, key_lengths


@dataclasses.dataclass(frozen=True)
class AllGatherKVAttention:
    """The attention functions SequenceParallel injects for `attn1` and `video_to_audio_attn`.

    Attributes:
        local: attention over the gathered keys; must take `key_value_seq_lengths`.
        axis_name: the mesh axis the video tokens are split over.
        mesh_size: devices on that axis.
        valid_tokens: the caller's video token count; keys past it are padding.
        padded_tokens: the video token count after padding to a multiple of `mesh_size`.
    """

    local: LocalAttentionFn
    axis_name: str
    mesh_size: int
    valid_tokens: int
    padded_tokens: int

    def _gather_kv(self, k: jax.Array, v: jax.Array) -> jax.Array:
        """Local `(B, T/n, C)` keys and values -> `(2, B, T, C)`, one all-gather."""
        return lax.all_gather(jnp.stack([k, v]), self.axis_name, axis=2, tiled=True)

    def video_self_attention(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Local `(B, T/n, H*D)` q/k/v (already normed and rotated) -> local `(B, T/n, H*D)`.

        `mask`, the caller's padded `(B, 1, T|1, T)` bias, is cut to this device's query rows; pad
        keys are removed by key length.
        """
        kv = self._gather_kv(k, v)
        rows = q.shape[1]
        mask = bias_block(as_bias4d(mask), lax.axis_index(self.axis_name) * rows, rows, axis=-2)
        lengths = key_lengths(self.valid_tokens, self.padded_tokens, q.shape[0])
        return self.local(q, kv[0], kv[1], heads=heads, mask=mask, key_value_seq_lengths=lengths)

    def video_to_audio(
        self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int, mask: jax.Array | None = None
    ) -> jax.Array:
        """Replicated audio queries `(B, T_a, H*D)` over local video keys/values `(B, T/n, H*D)`:
        all-gather the video K/V and attend on every device (the audio stream is replicated)."""
        if mask is not None:
            raise ValueError("video-to-audio attention takes no mask in LTX-2; got one.")
        kv = self._gather_kv(k, v)
        lengths = key_lengths(self.valid_tokens, self.padded_tokens, q.shape[0])
        return self.local(q, kv[0], kv[1], heads=heads, key_value_seq_lengths=lengths)
