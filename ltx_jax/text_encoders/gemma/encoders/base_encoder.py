"""Prompts -> Gemma's stacked hidden states and the token mask: the tokenizer plus the text model.

Source: ltx-core's `text_encoders/gemma/encoders/base_encoder.py` (`LTXGemmaTextEncoder.encode`,
upstream; `GemmaTextEncoder` in 1.0.0): tokenize each prompt to `max_length` (left padding),
run the language model with `output_hidden_states=True`, hand the hidden states and the mask to
the embeddings processor. Prompt enhancement (text generation) is not ported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import create_gemma_model
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel
from ltx_jax.text_encoders.gemma.tokenizer import TOKENIZER_MAX_LENGTH, LTXGemmaTokenizer


@jax.jit
def _stacked_hidden_states(graphdef: nnx.GraphDef, state: nnx.State, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.stack(nnx.merge(graphdef, state)(ids, mask), axis=-1)


class GemmaTextEncoder:
    """`encode(prompts)` -> (hidden states (B, S, D, L + 1), mask (B, S) int32), S = `tokenizer.max_length`.

    The forward runs under `jax.jit`; with parameters placed on a mesh (`shard_gemma`, or
    `from_root(..., mesh=...)`) XLA runs it sharded.
    """

    def __init__(self, model: Gemma3TextModel, tokenizer: LTXGemmaTokenizer) -> None:
        tokens, vocab = tokenizer.tokenizer.get_vocab_size(), model.config.vocab_size
        if tokens > vocab:
            # Out-of-range ids would be clamped silently by the embedding lookup under jit.
            raise ValueError(
                f"tokenizer has {tokens} tokens but the model's vocab_size is {vocab}; use the tokenizer of the "
                "same Gemma directory."
            )
        self.model, self.tokenizer = model, tokenizer

    @classmethod
    def from_root(
        cls,
        gemma_root: str | Path,
        *,
        param_dtype: jnp.dtype = jnp.bfloat16,
        mesh: Mesh | None = None,
        max_length: int = TOKENIZER_MAX_LENGTH,
    ) -> GemmaTextEncoder:
        """The Gemma 3 directory's model (weights split over `mesh` if given) and tokenizer."""
        model = create_gemma_model(gemma_root, param_dtype=param_dtype, mesh=mesh)
        return cls(model, LTXGemmaTokenizer.from_root(gemma_root, max_length))

    def hidden_states(self, input_ids: jax.Array, attention_mask: jax.Array) -> jax.Array:
        """Token ids and binary mask (B, S) -> every hidden state stacked on the last axis, (B, S, D, L + 1)."""
        graphdef, state = nnx.split(self.model)
        return _stacked_hidden_states(graphdef, state, jnp.asarray(input_ids), jnp.asarray(attention_mask))

    def encode(self, prompts: Sequence[str]) -> tuple[jax.Array, jax.Array]:
        """Prompts -> (hidden states (B, S, D, L + 1), binary mask (B, S)), one fused forward."""
        ids, mask = self.tokenizer.tokenize(prompts)
        return self.hidden_states(ids, mask), jnp.asarray(mask)
