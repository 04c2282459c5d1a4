"""Gemma 3 text generation with a KV cache: one prompt in, new tokens out, in jitted programs.

Source: transformers' `GenerationMixin.generate` as ltx-core's `GemmaTextEncoder._enhance` calls it
on `Gemma3ForConditionalGeneration` (`do_sample=True, temperature=0.7`, transformers' default
`top_k=50`, stop tokens `eos_token_id=[1, 106]`: `<eos>` and `<end_of_turn>`).

- Prefill: the prompt, padded to a multiple of `PROMPT_BUCKET` tokens so that prompts of similar
  length share the prefill and decode programs, runs through each decoder layer in turn (one compiled layer program,
  as in `GemmaTextEncoder`), writing its keys and values into a cache of bucket + `max_new_tokens`
  slots.
- Decode: one program, a `lax.while_loop` that chooses a token, stops at a stop token, and runs
  every layer on it. Nothing is recompiled per token and the host waits only for the result.
- Positions: slot t of the cache holds position t. The pad slots after the prompt are masked, then
  overwritten by the generated tokens, so the token chosen at step i sits at position P + i, as
  transformers numbers it (positions from the cumulative attention mask).
- Masks: causal; sliding-window layers see the last `sliding_window` positions; during the prefill
  the tokens of one image see each other in both directions (transformers' `token_type_ids` mask).
- Logits: the tied LM head in the weight dtype, then float32, as `generate` casts them; Gemma 3 has
  no final logit soft-capping. Sampling divides by the temperature, keeps the `top_k` largest and
  draws from their softmax (transformers' warper order); greedy takes the first largest.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.parallel.launch import launched
from ltx_jax.parallel.mesh import first_simulated_cpu_device
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel, KVCache, rope_tables, split_layers

PROMPT_BUCKET = 512  # prompts padded to a multiple of this share compiled programs (about 30 s each for 12B)


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How each next token is chosen: the most likely one (`greedy`), or drawn from the softmax of
    the logits divided by `temperature` over the `top_k` most likely tokens."""

    greedy: bool = False
    temperature: float = 0.7
    top_k: int = 50

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"temperature must be a positive number, got {self.temperature}; use greedy=True instead.")
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}.")


REFERENCE_SAMPLING = Sampling()  # ltx-core's prompt enhancement
GREEDY = Sampling(greedy=True)


@dataclasses.dataclass(frozen=True)
class Generated:
    """`tokens`: the new tokens without the stop token; `stopped`: whether a stop token ended them
    (else `max_new_tokens` did); `logits` (steps, vocab) float32: what each token was chosen from,
    the stop token's step included (only when asked for)."""

    tokens: tuple[int, ...]
    stopped: bool
    logits: np.ndarray | None = None


class Gemma3Generator:
    """`generate(prompt_ids, ...)` -> `Generated`; see the module docstring.

    `image_features_fn` maps pixel values (N, 3, H, W) to (N, tokens per image, D) (the vision tower
    and projector); the prompt then holds that many `image_token_id`s per image, whose embeddings
    the features replace. `device`: the one device a model split over simulated CPU devices generates on
    (a copy of its weights there; `one_device_on_simulated_cpus=False` keeps it split), else None.
    """

    def __init__(
        self,
        model: Gemma3TextModel,
        *,
        stop_token_ids: Sequence[int],
        image_token_id: int | None = None,
        image_features_fn: Callable[[jax.Array], jax.Array] | None = None,
        one_device_on_simulated_cpus: bool = True,
    ) -> None:
        self.config = model.config
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        self.image_token_id, self.image_features_fn = image_token_id, image_features_fn
        # decoding is hundreds of small steps: on simulated CPU devices each step's all-reduces would rendezvous
        # their threads on the same cores (a tiny Gemma 3's 512 tokens on 8 of them: about 24 s; on one: about 5)
        leaves = [leaf for leaf in jax.tree.leaves(nnx.state(model)) if isinstance(leaf, jax.Array)]
        devices = {d for leaf in leaves for d in leaf.sharding.device_set}
        self.device = first_simulated_cpu_device(devices) if one_device_on_simulated_cpus else None
        outer, layers = split_layers(model)
        if self.device is not None:
            outer, layers = _put(outer, self.device), [_put(layer, self.device) for layer in layers]
        self._outer, self._layers = outer, layers
        self._dtype = model.embed_tokens.weight[...].dtype

    def generate(
        self,
        prompt_ids: Sequence[int],
        *,
        max_new_tokens: int,
        sampling: Sampling = REFERENCE_SAMPLING,
        seed: int = 0,
        pixel_values: np.ndarray | None = None,
        return_logits: bool = False,
    ) -> Generated:
        """New tokens after `prompt_ids` (one prompt, special tokens included), at most `max_new_tokens`."""
        ids = np.asarray(prompt_ids, np.int32)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"prompt_ids must be a non-empty sequence of token ids, got shape {ids.shape}.")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}.")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(f"prompt_ids must lie in [0, {self.config.vocab_size}), got [{ids.min()}, {ids.max()}].")
        features, image_slots = self._image_inputs(ids, pixel_values)
        bucket = -(-ids.size // PROMPT_BUCKET) * PROMPT_BUCKET
        padded = np.zeros((1, bucket), np.int32)
        padded[0, : ids.size] = np.where(image_slots, 0, ids)
        blocks = np.full((1, bucket), -1, np.int32)
        blocks[0, : ids.size] = _image_blocks(image_slots)
        caches = self._prefill(padded, blocks, features, ids.size, bucket + max_new_tokens)
        tokens, steps, stopped, logits = _decode(
            self._outer,
            self._layers,
            caches,
            jnp.asarray(ids.size, jnp.int32),
            jax.random.key(seed),
            options=_DecodeOptions(max_new_tokens, sampling, self.stop_token_ids, return_logits),
        )
        steps, stopped = int(steps), bool(stopped)
        kept = np.asarray(tokens)[0, : steps - stopped]
        return Generated(
            tuple(int(t) for t in kept), stopped, None if logits is None else np.asarray(logits)[0, :steps]
        )

    def _image_inputs(self, ids: np.ndarray, pixel_values: np.ndarray | None) -> tuple[jax.Array | None, np.ndarray]:
        """The image features (1, image tokens, D) or None, and the (P,) mask of image-token slots."""
        slots = ids == self.image_token_id if self.image_token_id is not None else np.zeros(ids.shape, bool)
        if pixel_values is None:
            if slots.any():
                raise ValueError(f"prompt_ids hold {slots.sum()} image tokens but no pixel_values were given.")
            return None, slots
        if self.image_features_fn is None:
            raise ValueError("pixel_values were given but this generator has no vision tower (image_features_fn).")
        features = self.image_features_fn(jnp.asarray(pixel_values))
        count = features.shape[0] * features.shape[1]
        if slots.sum() != count:
            raise ValueError(
                f"prompt_ids hold {slots.sum()} image tokens (id {self.image_token_id}) but the images give {count} "
                "features; put the processor's image token sequence in the prompt once per image."
            )
        features = features.reshape(1, count, -1).astype(self._dtype)
        return (features if self.device is None else jax.device_put(features, self.device)), slots

    def _prefill(
        self, ids: np.ndarray, blocks: np.ndarray, features: jax.Array | None, length: int, slots: int
    ) -> tuple[list[KVCache], jax.Array]:
        """Every layer's cache (1, slots, kv_heads, head_dim) holding the prompt, and the prompt's
        last hidden state after the final norm (1, 1, D)."""
        cfg = self.config
        x, rope, masks = _prefill_inputs(
            *self._outer, jnp.asarray(ids), jnp.asarray(blocks), features, jnp.asarray(length, jnp.int32), slots
        )
        shape = (1, slots, cfg.num_key_value_heads, cfg.head_dim)
        caches = []
        for (graphdef, state), kind in zip(self._layers, cfg.layer_types, strict=True):
            empty = KVCache(jnp.zeros(shape, self._dtype), jnp.zeros(shape, self._dtype))
            x, cache = _prefill_layer(graphdef, state, x, *rope[kind], masks[kind], empty)
            caches.append(cache)
        return caches, _last_hidden(*self._outer, x, jnp.asarray(length, jnp.int32))


def _put(split: tuple[nnx.GraphDef, nnx.State], device: jax.Device) -> tuple[nnx.GraphDef, nnx.State]:
    return split[0], jax.device_put(split[1], device)


def _image_blocks(image_slots: np.ndarray) -> np.ndarray:
    """(P,) index of the image each slot belongs to (a run of image tokens), -1 for text."""
    starts = image_slots & ~np.concatenate([[False], image_slots[:-1]])
    return np.where(image_slots, np.cumsum(starts) - 1, -1).astype(np.int32)


def _masks_for(
    query_pos: jax.Array, length: jax.Array, slots: int, window: int, blocks: jax.Array | None = None
) -> dict[str, jax.Array]:
    """Boolean (1, 1, Q, slots) masks per layer type for queries at `query_pos` (Q,): causal (a slot
    past a query is a pad or not yet written, and hidden), or, in the prefill (`blocks` (1, slots)),
    the same image's tokens both ways among the prompt's first `length` slots."""
    key_pos = jnp.arange(slots)[None, :]
    q = query_pos[:, None]
    seen = key_pos <= q
    if blocks is not None:
        qb, kb = blocks[0, : query_pos.shape[0], None], blocks[0][None, :]
        seen = seen | ((key_pos < length) & (qb == kb) & (qb >= 0))
    sliding = seen & (q - key_pos < window)
    return {"full_attention": seen[None, None], "sliding_attention": sliding[None, None]}


@launched
@functools.partial(jax.jit, static_argnames="slots")
def _prefill_inputs(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    ids: jax.Array,
    blocks: jax.Array,
    features: jax.Array | None,
    length: jax.Array,
    slots: int,
) -> tuple:
    model = nnx.merge(graphdef, state)
    x = model.embed_tokens(ids)
    if features is not None:  # image embeddings replace the placeholders' (not scaled, as in transformers)
        order = jnp.cumsum(blocks[0] >= 0) - 1
        x = jnp.where((blocks >= 0)[..., None], features[0][jnp.clip(order, 0)][None], x)
    positions = jnp.arange(ids.shape[1])
    padded_blocks = jnp.pad(blocks, ((0, 0), (0, slots - ids.shape[1])), constant_values=-1)
    masks = _masks_for(positions, length, slots, model.config.sliding_window, padded_blocks)
    return x, rope_tables(model.config, positions, x.dtype), masks


@launched
@jax.jit
def _prefill_layer(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    x: jax.Array,
    cos: jax.Array,
    sin: jax.Array,
    mask: jax.Array,
    cache: KVCache,
) -> tuple[jax.Array, KVCache]:
    return nnx.merge(graphdef, state).cached(x, cos, sin, mask, cache, jnp.zeros((), jnp.int32))


@launched
@jax.jit
def _last_hidden(graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, length: jax.Array) -> jax.Array:
    return nnx.merge(graphdef, state).norm(jax.lax.dynamic_slice_in_dim(x, length - 1, 1, axis=1))


@dataclasses.dataclass(frozen=True)
class _DecodeOptions:
    max_new_tokens: int
    sampling: Sampling
    stop_token_ids: tuple[int, ...]
    return_logits: bool


def choose(logits: jax.Array, sampling: Sampling, key: jax.Array) -> jax.Array:
    """(B, vocab) float32 logits -> (B,) int32 token ids, per `sampling`."""
    if sampling.greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    values, indices = jax.lax.top_k(logits / sampling.temperature, min(sampling.top_k, logits.shape[-1]))
    picked = jax.random.categorical(key, values, axis=-1)
    return jnp.take_along_axis(indices, picked[:, None], axis=-1)[:, 0].astype(jnp.int32)


@launched
@functools.partial(jax.jit, static_argnames="options")
def _decode(
    outer: tuple,
    layers: list[tuple],
    prefilled: tuple[list[KVCache], jax.Array],
    length: jax.Array,
    key: jax.Array,
    *,
    options: _DecodeOptions,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
    """(tokens (1, max_new_tokens), steps taken, stopped at a stop token, logits (1, steps, vocab) or None)."""
    model = nnx.merge(*outer)
    cfg = model.config
    layer_modules = [nnx.merge(*layer) for layer in layers]
    caches, hidden = prefilled
    slots = caches[0].keys.shape[1]
    stops = jnp.asarray(options.stop_token_ids or (-1,), jnp.int32)
    vocab = model.embed_tokens.weight.shape[0]

    def body(carry: tuple) -> tuple:
        step, logits, caches, tokens, _, rows = carry
        token = choose(logits, options.sampling, jax.random.fold_in(key, step))
        tokens = tokens.at[:, step].set(token)
        rows = None if rows is None else rows.at[:, step].set(logits)
        position = length + step
        x = model.embed_tokens(token[:, None])
        rope = rope_tables(cfg, position[None], x.dtype)
        masks = _masks_for(position[None], length, slots, cfg.sliding_window)
        new_caches = []
        for layer, kind, cache in zip(layer_modules, cfg.layer_types, caches, strict=True):
            x, cache = layer.cached(x, *rope[kind], masks[kind], cache, position)
            new_caches.append(cache)
        logits = model.embed_tokens.attend(model.norm(x))[:, 0].astype(jnp.float32)
        return step + 1, logits, new_caches, tokens, jnp.isin(token, stops).all(), rows

    def cond(carry: tuple) -> jax.Array:
        return (carry[0] < options.max_new_tokens) & ~carry[4]

    logits = model.embed_tokens.attend(hidden)[:, 0].astype(jnp.float32)
    tokens = jnp.zeros((1, options.max_new_tokens), jnp.int32)
    rows = jnp.zeros((1, options.max_new_tokens, vocab), jnp.float32) if options.return_logits else None
    init = (jnp.zeros((), jnp.int32), logits, caches, tokens, jnp.zeros((), bool), rows)
    steps, _, _, tokens, stopped, rows = jax.lax.while_loop(cond, body, init)
    return tokens, steps, stopped, rows
