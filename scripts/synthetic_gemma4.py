"""Random-weight LTX-2.5 text-encoder files (`gemma4-12b-with-proj-ltx-2.5-bf16.safetensors`), packed as
ltx-core 1.2.0 packs them. Used by synthetic_ltx25.py.

1.2.0 packs a Hugging Face Gemma 4 directory into one file (`text_encoders/gemma/gemma_assets.py`:
`build_text_encoder_tensors_from_gemma_root`, then `save_text_encoder_safetensors`): the directory's weights as
`save_pretrained` wrote them (no tied `lm_head`, transformers' checkpoint names), renamed Comfy-flat by
`_flatten_gemma4_unified_keys_for_comfy` (`model.language_model.*` -> `model.*`, `model.vision_embedder.*` ->
`vision_model.*`, `model.embed_vision.*` -> `multi_modal_projector.*`, `model.embed_audio.*` ->
`audio_projector.*`); the feature extractor's `text_embedding_projection.*`; `tokenizer.json` as the uint8 tensor
`tokenizer_json`; every other `*.json` / `*.jinja` of the directory but config.json as a uint8 tensor
`hf_asset__<name>`; metadata `format` "pt" and `gemma_config` (config.json). This module writes that file
directly. Names and shapes come from transformers' model of the config's architecture built on the meta device,
its state dict passed through what `save_pretrained` does to it (`remove_tied_weights_from_state_dict`,
`revert_weight_conversion`) and the Comfy renaming; tests/test_synthetic_gemma4.py checks them against a file
1.2.0 packed itself (tests/fixtures/ltx25/). At full size (48 layers; the 4096 / 2048-wide projections of the
49 hidden states that synthetic_ltx25.py plans) the file holds 13.1B values, 26.2 GB.

Known (ltx25-reference.md §2, ltx-jax's gemma4_config.py): the text model: 48 layers, hidden 3840, MLP 15360,
vocabulary 262144, tied embeddings, 5 sliding (16 x 256 heads, 8 KV heads, window 1024, RoPE 1e4) : 1 full (16 x
512, one KV head whose values are the keys, proportional RoPE 0.25 / 1e6); `gemma_version` "gemma4-12b-ltx-v1";
the multimodal token ids (transformers' `Gemma4UnifiedConfig` defaults, which the text model reads). Not known,
so assumed: the vision and audio embedders' sizes (transformers' `Gemma4UnifiedVisionConfig` /
`Gemma4UnifiedAudioConfig` defaults); `max_position_embeddings` (the default 262144); the token strings (Gemma
4's names at the ids known here: `<pad>` `<eos>` `<bos>` `<unk>` `<mask>` 0-4, `<|tool_response>` 50, `<|turn>`
105, `<turn|>` 106, the seven multimodal tokens; Gemma 4's other control tokens are left out, their ids unknown;
the rest are byte-fallback, character and `<unusedN>` pieces, as synthetic_gemma.py's Gemma 3 vocabulary); the
sidecars: tokenizer_config.json with those tokens, processor_config.json with the processor's three
sub-processors at their classes' defaults (not checked: 1.2.0 builds them only where torchvision is installed,
which the reference environment lacks), generation_config.json with Gemma 4's end-of-generation ids, and no
chat template (Gemma 4 unified cannot enhance prompts). `layers` N keeps the 5 : 1 pattern for the first N
layers and makes the last one full, as transformers and ltx-jax force it.

Values: bf16 normal(0, 0.02), norm weights 1 and biases 0, `layer_scalar` 1 (set by the model's own
initializer), written tensor by tensor as NAME.partial, renamed when complete (synthetic_files.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import transformers
from synthetic_files import Planned, model_tensors, write_safetensors
from synthetic_gemma import bpe_tokenizer, vocabulary
from transformers.core_model_loading import revert_weight_conversion
from transformers.modeling_utils import remove_tied_weights_from_state_dict
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

GEMMA_VERSION, GEMMA_LAYERS, FULL_EVERY = "gemma4-12b-ltx-v1", 48, 6
GEMMA_CONFIG_METADATA_KEY, TOKENIZER_JSON_TENSOR_KEY, HF_ASSET_PREFIX = "gemma_config", "tokenizer_json", "hf_asset__"
_TEXT = {
    "vocab_size": 262_144, "hidden_size": 3840, "intermediate_size": 15360, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 1,
    "attention_k_eq_v": True, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 1024,
    "max_position_embeddings": 262_144, "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1,
    "bos_token_id": 2, "tie_word_embeddings": True,
}  # fmt: skip
_ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}
# transformers' Gemma4UnifiedVisionConfig / Gemma4UnifiedAudioConfig defaults (assumed: the 12B's are not published).
_VISION = {"patch_size": 16, "pooling_kernel_size": 3, "mm_embed_dim": 3840, "mm_posemb_size": 1120,
           "output_proj_dims": 3840}  # fmt: skip
_AUDIO = {"audio_embed_dim": 640}
# tiny: the widths of 1.2.0's fixture (tests/record_ltx25_fixtures.py) with 4 query and 2 KV heads; the vocabulary
# stays Gemma's (the tokenizer's ids reach 262143).
_TINY = {
    "text_config": {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 8, "global_head_dim": 16},
    "vision_config": {"patch_size": 4, "pooling_kernel_size": 2, "mm_embed_dim": 16, "mm_posemb_size": 8,
                      "output_proj_dims": 32},
    "audio_config": {"audio_embed_dim": 16},
}  # fmt: skip
# Gemma4UnifiedConfig's multimodal token ids and Gemma 4's strings for them.
MULTIMODAL_TOKENS = {
    "boi_token_id": (255_999, "<|image>"), "eoi_token_id": (258_882, "<image|>"),
    "image_token_id": (258_880, "<|image|>"), "video_token_id": (258_884, "<|video|>"),
    "boa_token_id": (256_000, "<|audio>"), "eoa_token_index": (258_883, "<audio|>"),
    "audio_token_id": (258_881, "<|audio|>"),
}  # fmt: skip
TEXT_TOKENS = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 50: "<|tool_response>",
               105: "<|turn>", 106: "<turn|>"}  # fmt: skip
END_OF_GENERATION = (1, 106, 50)  # <eos>, <turn|>, <|tool_response> (transformers' Gemma 4 GGUF loader)
# tokenizer_config.json's named tokens -> the multimodal config key whose string it is, or the string.
_NAMED_TOKENS = {
    "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>",
    "boi_token": "boi_token_id", "eoi_token": "eoi_token_id", "image_token": "image_token_id",
    "boa_token": "boa_token_id", "eoa_token": "eoa_token_index", "audio_token": "audio_token_id",
    "sot_token": "<|turn>", "eot_token": "<turn|>", "str_token": "<|tool_response>",
}  # fmt: skip
# processor_config.json's sub-processors as transformers 5 nests them, each of its class's defaults (1.2.0 builds
# them on load where torchvision is installed; only prompt enhancement, which Gemma 4 unified cannot do, uses them).
PROCESSORS = {
    name: {f"{name}_type": class_name}
    for name, class_name in (("feature_extractor", "Gemma4UnifiedAudioFeatureExtractor"),
                             ("image_processor", "Gemma4UnifiedImageProcessor"),
                             ("video_processor", "Gemma4UnifiedVideoProcessor"))
}  # fmt: skip
# 1.2.0's `_flatten_gemma4_unified_keys_for_comfy`: checkpoint prefix -> file prefix, the first match applying.
COMFY_PREFIXES = (
    ("model.language_model.", "model."),
    ("model.vision_embedder.", "vision_model."),
    ("model.embed_vision.", "multi_modal_projector."),
    ("model.embed_audio.", "audio_projector."),
)


def layer_types(layers: int) -> list[str]:
    """Five sliding layers, then a full one, repeated; the last layer full (transformers forces it)."""
    full = [(i + 1) % FULL_EVERY == 0 or i == layers - 1 for i in range(layers)]
    return ["full_attention" if f else "sliding_attention" for f in full]


def gemma4_config(layers: int | None = None, *, tiny: bool = False) -> dict[str, Any]:
    """The text encoder's `gemma_config`: the 12B LTX-2.5 Gemma 4 with `layers` text layers (all 48 if None);
    `tiny`: the same structure with small widths (runs on a CPU)."""
    layers = GEMMA_LAYERS if layers is None else layers
    if layers < 1:
        raise ValueError(f"layers must be a positive layer count (or None for all {GEMMA_LAYERS}), got {layers}.")
    rope = {kind: dict(params) for kind, params in _ROPE.items()}
    text = {**_TEXT, "num_hidden_layers": layers, "layer_types": layer_types(layers), "rope_parameters": rope}
    sections = {"text_config": text, "vision_config": dict(_VISION), "audio_config": dict(_AUDIO)}
    for name, values in _TINY.items() if tiny else ():
        sections[name].update(values)
    return {
        "model_type": "gemma4_unified", "architectures": ["Gemma4UnifiedForConditionalGeneration"],
        "gemma_version": GEMMA_VERSION, "dtype": "bfloat16", "tie_word_embeddings": True,
        **{key: token_id for key, (token_id, _) in MULTIMODAL_TOKENS.items()},
        **{name: {"model_type": f"gemma4_unified_{name.removesuffix('_config')}", **values}
           for name, values in sections.items()},
    }  # fmt: skip


def build_model(config: Mapping[str, Any]) -> transformers.PreTrainedModel:
    """transformers' model of `config` (its `architectures[0]`, the config read as 1.2.0's
    `build_gemma_hf_config` reads it), parameters on the meta device; the stored buffers (`layer_scalar`) on
    the CPU with the values the model's own initializer gives them."""
    hf_config = CONFIG_MAPPING[config["model_type"]].from_dict(dict(config))
    with torch.device("meta"):
        model = getattr(transformers, config["architectures"][0])(hf_config)
    params = dict(model.named_parameters(remove_duplicate=False))
    for key, value in model.state_dict().items():
        if value.is_meta and key not in params:
            owner_name, _, leaf = key.rpartition(".")
            owner = model.get_submodule(owner_name)
            setattr(owner, leaf, torch.empty_like(value, device="cpu"))
            model._init_weights(owner)
    return model


def comfy_key(key: str) -> str:
    """A checkpoint key as 1.2.0's packer writes it (`COMFY_PREFIXES`)."""
    old, new = next(((o, n) for o, n in COMFY_PREFIXES if key.startswith(o)), ("", ""))
    return new + key[len(old) :]


def plan_text_encoder(config: Mapping[str, Any], projection: Mapping[str, Planned]) -> dict[str, Planned]:
    """File key -> tensor of the packed file's weights for `config` (`save_pretrained`'s names made Comfy-flat)
    and the given `text_embedding_projection.*` tensors; the uint8 assets are `text_encoder_assets`'."""
    model = build_model(config)
    planned = model_tensors(model)
    kept = remove_tied_weights_from_state_dict(model.state_dict(), model)  # as save_pretrained: no tied lm_head
    names = {id(tensor): key for key, tensor in kept.items()}
    out: dict[str, Planned] = {}
    for key, tensor in revert_weight_conversion(model, kept).items():  # the names save_pretrained writes
        if id(tensor) not in names:
            raise RuntimeError(f"transformers converts {key!r} on saving, beyond renaming; plan it by hand.")
        out[comfy_key(key)] = planned[names[id(tensor)]]
    if len(out) != len(kept):
        raise RuntimeError(f"{len(kept)} checkpoint keys became {len(out)} file keys; check COMFY_PREFIXES.")
    if clash := sorted(out.keys() & projection.keys()):
        raise ValueError(f"projection keys {clash[:4]} are Gemma's own; pass the text_embedding_projection.* ones.")
    return {**out, **projection}


def _token_strings(config: Mapping[str, Any]) -> dict[int, str]:
    """Id -> string of every special token of the vocabulary."""
    return {**TEXT_TOKENS, **{config[key]: text for key, (_, text) in MULTIMODAL_TOKENS.items()}}


def tokenizer_json(config: Mapping[str, Any]) -> bytes:
    """tokenizer.json: a byte-fallback BPE over `vocab_size` pieces, the special tokens at Gemma 4's ids; it adds
    no BOS (Gemma 4's does not; ltx-core and ltx-jax prepend it)."""
    specials = _token_strings(config)
    pieces = vocabulary(specials, config["text_config"]["vocab_size"])
    return bpe_tokenizer(pieces, list(specials.values())).to_str().encode()


def sidecars(config: Mapping[str, Any]) -> dict[str, Any]:
    """The directory's JSON files other than config.json and tokenizer.json (file name -> value)."""
    named = {key: MULTIMODAL_TOKENS[v][1] if v in MULTIMODAL_TOKENS else v for key, v in _NAMED_TOKENS.items()}
    text = config["text_config"]
    return {
        "tokenizer_config.json": {
            "tokenizer_class": "GemmaTokenizer", "processor_class": "Gemma4UnifiedProcessor", **named,
            "extra_special_tokens": [MULTIMODAL_TOKENS["video_token_id"][1]], "padding_side": "left",
        },
        "processor_config.json": {"processor_class": "Gemma4UnifiedProcessor", **PROCESSORS},
        "generation_config.json": {"bos_token_id": text["bos_token_id"], "eos_token_id": list(END_OF_GENERATION),
                                   "pad_token_id": text["pad_token_id"]},
    }  # fmt: skip


def text_encoder_assets(config: Mapping[str, Any]) -> dict[str, bytes]:
    """The packed file's uint8 tensors: `tokenizer_json` and `hf_asset__<name>` per sidecar."""
    files = {name: (json.dumps(value, indent=2) + "\n").encode() for name, value in sidecars(config).items()}
    return {TOKENIZER_JSON_TENSOR_KEY: tokenizer_json(config), **{HF_ASSET_PREFIX + k: v for k, v in files.items()}}


def write_text_encoder(
    path: str | os.PathLike, config: Mapping[str, Any], projection: Mapping[str, Planned], seed: int, workers: int
) -> None:
    """The packed text-encoder file of `config` with the `text_embedding_projection.*` tensors `projection`."""
    tensors = plan_text_encoder(config, projection)
    tensors.update({key: Planned.of_bytes(data) for key, data in text_encoder_assets(config).items()})
    metadata = {"format": "pt", GEMMA_CONFIG_METADATA_KEY: json.dumps(config)}
    write_safetensors(Path(path), tensors, metadata, seed, workers)
