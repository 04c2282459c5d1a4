"""Prompts -> Gemma's stacked hidden states and the token mask: the tokenizer plus the text model.

Source: ltx-core's `text_encoders/gemma/encoders/base_encoder.py` (`LTXGemmaTextEncoder.encode`,
upstream; `GemmaTextEncoder` in 1.0.0): tokenize each prompt to `max_length` (left padding),
run the language model with `output_hidden_states=True`, hand the hidden states and the mask to
the embeddings processor. The language model is Gemma 3 (LTX-2.3: a Hugging Face directory) or Gemma 4
(LTX-2.5: its packed text-encoder file, or a directory), told apart by the config's `model_type`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.parallel.launch import launched
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import create_gemma_model, gemma_json
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel, split_layers
from ltx_jax.text_encoders.gemma.encoders.gemma4_configurator import create_gemma4_model
from ltx_jax.text_encoders.gemma.encoders.gemma4_model import Gemma4TextModel
from ltx_jax.text_encoders.gemma.gemma_assets import GEMMA_CONFIG_METADATA_KEY, GemmaAssets
from ltx_jax.text_encoders.gemma.tokenizer import TOKENIZER_MAX_LENGTH, LTXGemmaTokenizer

# cuBLAS for every matrix product instead of XLA's Triton GEMM fusions, whose autotuning made compiling
# Gemma 3 12B's encoder programs the slowest part of a cold run's prompt encoding
# (benchmarks/results/2026-12-02/README.md, "Third round")
GEMMA_COMPILER_OPTIONS: dict[str, bool] = {"xla_gpu_enable_triton_gemm": False}


def _jit(fn: Callable) -> Callable:  # launched: the layers are a chain of programs over the mesh
    return launched(jax.jit(fn, compiler_options=GEMMA_COMPILER_OPTIONS))


@_jit
def _layer_inputs(graphdef: nnx.GraphDef, state: nnx.State, ids: jax.Array, mask: jax.Array) -> tuple:
    return nnx.merge(graphdef, state).layer_inputs(ids, mask)


@_jit
def _layer(
    graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array
) -> jax.Array:
    return nnx.merge(graphdef, state)(x, cos, sin, mask)


@_jit
def _stack(graphdef: nnx.GraphDef, state: nnx.State, hidden_states: list[jax.Array]) -> jax.Array:
    """The hidden states stacked on a last axis, the final norm applied to the last one."""
    return jnp.stack([*hidden_states[:-1], nnx.merge(graphdef, state).norm(hidden_states[-1])], axis=-1)


class GemmaTextEncoder:
    """`encode(prompts)` -> (hidden states (B, S, D, L + 1), mask (B, S) int32), S = `tokenizer.max_length`.

    The forward runs as jitted programs: the embeddings, one decoder layer (compiled once, run for
    each of the layers in turn: compiling all 48 layers of Gemma 3 12B unrolled took about 25 s on an
    H200) and the stacking. With parameters placed on a mesh (`shard_gemma`, or
    `from_root(..., mesh=...)`) XLA runs them sharded.
    """

    def __init__(self, model: Gemma3TextModel | Gemma4TextModel, tokenizer: LTXGemmaTokenizer) -> None:
        tokens, vocab = tokenizer.tokenizer.get_vocab_size(), model.config.vocab_size
        if tokens > vocab:
            # Out-of-range ids would be clamped silently by the embedding lookup under jit.
            raise ValueError(
                f"tokenizer has {tokens} tokens but the model's vocab_size is {vocab}; use the tokenizer of the "
                "same Gemma directory."
            )
        self.model, self.tokenizer = model, tokenizer
        self._outer, self._layers = split_layers(model)

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

    @classmethod
    def from_path(
        cls,
        path: str | Path,
        *,
        param_dtype: jnp.dtype = jnp.bfloat16,
        mesh: Mesh | None = None,
        max_length: int = TOKENIZER_MAX_LENGTH,
    ) -> GemmaTextEncoder:
        """A Gemma 3 directory (`from_root`), or LTX-2.5's Gemma 4 as a packed file or a directory."""
        if gemma_model_type(path) != "gemma4_unified":
            return cls.from_root(path, param_dtype=param_dtype, mesh=mesh, max_length=max_length)
        return cls.from_assets(GemmaAssets.load(path), param_dtype=param_dtype, mesh=mesh, max_length=max_length)

    @classmethod
    def from_assets(
        cls,
        assets: GemmaAssets,
        *,
        param_dtype: jnp.dtype = jnp.bfloat16,
        mesh: Mesh | None = None,
        max_length: int = TOKENIZER_MAX_LENGTH,
    ) -> GemmaTextEncoder:
        """LTX-2.5's Gemma 4 model and tokenizer from its loaded assets (`GemmaAssets.load`)."""
        return cls(create_gemma4_model(assets, param_dtype=param_dtype, mesh=mesh), assets.tokenizer(max_length))

    def hidden_states(self, input_ids: jax.Array, attention_mask: jax.Array) -> jax.Array:
        """Token ids and binary mask (B, S) -> every hidden state stacked on the last axis, (B, S, D, L + 1)."""
        x, rope, masks = _layer_inputs(*self._outer, jnp.asarray(input_ids), jnp.asarray(attention_mask))
        hidden_states = [x]
        for (graphdef, state), kind in zip(self._layers, self.model.config.layer_types, strict=True):
            x = _layer(graphdef, state, x, *rope[kind], masks[kind])
            hidden_states.append(x)
        return _stack(*self._outer, hidden_states)

    def encode(self, prompts: Sequence[str]) -> tuple[jax.Array, jax.Array]:
        """Prompts -> (hidden states (B, S, D, L + 1), binary mask (B, S)), one fused forward."""
        ids, mask = self.tokenizer.tokenize(prompts)
        return self.hidden_states(ids, mask), jnp.asarray(mask)


def gemma_model_type(path: str | Path) -> str:
    """The `model_type` of a text encoder's config: the packed file's `gemma_config`, else the directory's
    `config.json` ("gemma3" for LTX-2.3, "gemma4_unified" for LTX-2.5)."""
    path = Path(path)
    if path.is_file():
        metadata = SafetensorsFile(path).metadata
        if GEMMA_CONFIG_METADATA_KEY not in metadata:
            raise ValueError(
                f"{path} has no metadata key {GEMMA_CONFIG_METADATA_KEY!r}: it is not a packed text-encoder file; "
                "pass the text encoder's file, or the Gemma directory."
            )
        return json.loads(metadata[GEMMA_CONFIG_METADATA_KEY]).get("model_type", "")
    return gemma_json(path, "config.json").get("model_type", "")
