"""Prompt text -> the DiT's video and audio contexts: tokenizer -> Gemma -> embeddings processor, cached.

Source: ltx-pipelines' `utils/blocks.py::PromptEncoder.__call__` (upstream): `text_encoder.encode`
on all prompts in one forward, then `embeddings_processor.process_hidden_states` per prompt.
Here the prompts missing from the optional `PromptCache` go through Gemma in one batch; cached
ones are read back from disk.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model.abstract import abstract_module
from ltx_jax.parallel.launch import launched
from ltx_jax.parallel.mesh import first_simulated_cpu_device
from ltx_jax.text_encoders.gemma.embeddings_processor import (
    EmbeddingsProcessor,
    EmbeddingsProcessorConfigurator,
    EmbeddingsProcessorOutput,
    embeddings_processor_state_dict,
)
from ltx_jax.text_encoders.gemma.encoders.base_encoder import GEMMA_COMPILER_OPTIONS, GemmaTextEncoder, gemma_model_type
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import gemma_json
from ltx_jax.text_encoders.gemma.gemma_assets import GemmaAssets, check_gemma_version
from ltx_jax.text_encoders.gemma.prompt_cache import PromptCache, checkpoint_identity
from ltx_jax.text_encoders.gemma.prompt_enhancer import PromptEnhancer
from ltx_jax.text_encoders.gemma.tokenizer import TOKENIZER_MAX_LENGTH

_FIELDS = EmbeddingsProcessorOutput._fields  # ("video_encoding", "audio_encoding", "attention_mask")


@launched
@functools.partial(jax.jit, compiler_options=GEMMA_COMPILER_OPTIONS)
def _process(graphdef: nnx.GraphDef, state: nnx.State, hidden: jax.Array, mask: jax.Array) -> EmbeddingsProcessorOutput:
    return nnx.merge(graphdef, state).process_hidden_states(hidden, mask)


class PromptEncoder:
    """`encode_prompts(prompts)` -> one `EmbeddingsProcessorOutput` per prompt, each with batch 1:
    video (1, S, Dv), audio (1, S, Da) or None, binary mask (1, S); S = the tokenizer's max length.

    Contexts come back in the processor's parameter dtype (a cache hit returns them in that
    dtype too). `enhancer()` gives the `PromptEnhancer` on the same Gemma weights, built on first
    use by `make_enhancer`.
    """

    def __init__(
        self,
        text_encoder: GemmaTextEncoder,
        processor: EmbeddingsProcessor,
        cache: PromptCache | None = None,
        *,
        make_enhancer: Callable[[], PromptEnhancer] | None = None,
    ) -> None:
        self.text_encoder, self.processor, self.cache = text_encoder, processor, cache
        self.dtype = jax.tree.leaves(nnx.state(processor, nnx.Param))[0].dtype
        self._make_enhancer, self._enhancer = make_enhancer, None

    def enhancer(self) -> PromptEnhancer:
        """Gemma 3 as a prompt rewriter (generation on this encoder's weights)."""
        if self._enhancer is None:
            if self._make_enhancer is None:
                raise ValueError(
                    "this prompt encoder has no prompt enhancer: it was built without make_enhancer, or its text "
                    "encoder is LTX-2.5's Gemma 4, which cannot generate text: give a Gemma 3 directory as "
                    "prompt_enhancer_gemma_root (--prompt-enhancer-gemma-root)."
                )
            self._enhancer = self._make_enhancer()
        return self._enhancer

    def encode_prompts(self, prompts: Sequence[str]) -> list[EmbeddingsProcessorOutput]:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a list of strings; use encode_prompt for a single prompt.")
        found = {p: self.cache.load(p) for p in prompts} if self.cache is not None else {}
        misses = list(dict.fromkeys(p for p in prompts if found.get(p) is None))
        computed = {}
        if misses:
            out = self._process(*self.text_encoder.encode(misses))
            for i, prompt in enumerate(misses):
                computed[prompt] = EmbeddingsProcessorOutput(*(None if a is None else a[i : i + 1] for a in out))
                if self.cache is not None:
                    self.cache.save(prompt, {k: v for k, v in computed[prompt]._asdict().items() if v is not None})
        return [computed[p] if p in computed else self._from_cache(found[p]) for p in prompts]

    def _process(self, hidden: jax.Array, mask: jax.Array) -> EmbeddingsProcessorOutput:
        """The embeddings processor on Gemma's output, on the devices that output is on; on one of them where
        they are simulated CPU devices: there the replicated program would run once per device on the same
        cores (8 devices: 14 s instead of 2 for a tiny model's connectors at 1024 tokens)."""
        graphdef, state = nnx.split(self.processor)
        one = first_simulated_cpu_device(hidden.sharding.device_set)
        if one is None:
            return _process(graphdef, state, hidden, mask)
        out = _process(graphdef, jax.device_put(state, one), jax.device_put(hidden, one), jax.device_put(mask, one))
        return jax.device_put(out, hidden.sharding)

    def encode_prompt(self, prompt: str) -> EmbeddingsProcessorOutput:
        return self.encode_prompts([prompt])[0]

    def _from_cache(self, arrays: Mapping[str, np.ndarray]) -> EmbeddingsProcessorOutput:
        cast = {
            name: jnp.asarray(a, jnp.int32 if name == "attention_mask" else self.dtype) for name, a in arrays.items()
        }
        return EmbeddingsProcessorOutput(*(cast.get(name) for name in _FIELDS))


def build_prompt_encoder(
    gemma_root: str | os.PathLike,
    ltx_config: Mapping[str, Any],
    ltx_tensors: Mapping[str, Any],
    *,
    gemma_dtype: jnp.dtype = jnp.bfloat16,
    processor_dtype: jnp.dtype = jnp.float32,
    mesh: Mesh | None = None,
    cache_dir: str | os.PathLike | None = None,
    ltx_checkpoint_path: str | os.PathLike | None = None,
    ltx_metadata: Mapping[str, str] | None = None,
    max_length: int = TOKENIZER_MAX_LENGTH,
    enhancer_root: str | os.PathLike | None = None,
) -> PromptEncoder:
    """Gemma from `gemma_root` (split over `mesh` if given) + the embeddings processor of an LTX
    checkpoint (`ltx_config`: its parsed metadata config; `ltx_tensors`: its key -> tensor mapping).

    `gemma_root` is a Gemma 3 directory (LTX-2.3) or LTX-2.5's Gemma 4 text-encoder file (or directory), whose
    feature-extractor projections join `ltx_tensors` (upstream loads the processor from both files). With
    `ltx_metadata` (the transformer file's raw metadata) the two are checked to belong together
    (`check_gemma_version`). With `cache_dir`, contexts are cached per prompt; the cache key includes the
    identity of `gemma_root` and of `ltx_checkpoint_path` (required then: the processor weights live there).
    Prompts are enhanced by `enhancer_root`'s Gemma 3, loaded when first asked for (as 1.2.0's
    `prompt_enhancer_gemma_root`), else by `gemma_root`'s own Gemma 3 on the encoder's weights.
    """
    if cache_dir is not None and ltx_checkpoint_path is None:
        raise ValueError("cache_dir needs ltx_checkpoint_path: the cache key must name the processor's weights.")
    # Gemma 4 (LTX-2.5): its assets, read once, give the config, the model and tokenizer, and the projections.
    assets = GemmaAssets.load(gemma_root) if gemma_model_type(gemma_root) == "gemma4_unified" else None
    if ltx_metadata is not None:
        config = gemma_json(gemma_root, "config.json") if assets is None else assets.config
        check_gemma_version(
            ltx_metadata,
            config,
            transformer=os.fspath(ltx_checkpoint_path or "the transformer"),
            text_encoder=os.fspath(gemma_root),
        )
    options = {"param_dtype": gemma_dtype, "mesh": mesh, "max_length": max_length}
    if assets is None:
        text_encoder = GemmaTextEncoder.from_root(gemma_root, **options)
    else:
        text_encoder = GemmaTextEncoder.from_assets(assets, **options)
    gemma = text_encoder.model.config
    processor = abstract_module(  # shapes only: every parameter is loaded next (random init took minutes on a CPU)
        lambda rngs: EmbeddingsProcessorConfigurator.from_config(
            ltx_config,
            embedding_dim=gemma.hidden_size,
            num_layers=gemma.num_hidden_layers + 1,
            rngs=rngs,
            param_dtype=processor_dtype,
        )
    )
    tensors = dict(ltx_tensors)
    if assets is not None:
        tensors.update(assets.lazy_tensors())
    load_state_dict(processor, embeddings_processor_state_dict(tensors), prefix="")
    cache = None
    if cache_dir is not None:
        identity = checkpoint_identity(Path(gemma_root), Path(ltx_checkpoint_path))
        cache = PromptCache(cache_dir, checkpoint_id=identity, max_length=max_length)
    enhancer = None
    if enhancer_root is not None:
        enhancer = functools.partial(_separate_enhancer, enhancer_root, options)
    elif assets is None:  # Gemma 4 unified has no text generation to enhance prompts with
        enhancer = functools.partial(
            PromptEnhancer.from_root, gemma_root, text_encoder, mesh=mesh, param_dtype=gemma_dtype
        )
    return PromptEncoder(text_encoder, processor, cache, make_enhancer=enhancer)


def _separate_enhancer(root: str | os.PathLike, options: Mapping[str, Any]) -> PromptEnhancer:
    """A Gemma 3 of its own (`root`) as the prompt rewriter, its weights split as the encoder's (`options`)."""
    text_encoder = GemmaTextEncoder.from_root(root, **options)
    return PromptEnhancer.from_root(root, text_encoder, mesh=options["mesh"], param_dtype=options["param_dtype"])
