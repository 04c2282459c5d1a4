"""The synthetic Gemma 3 directory: config.json, sharded safetensors with their index, and tokenizer files
with Gemma's vocabulary size and special-token ids. Used by make_synthetic_checkpoint.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from synthetic_files import Planned, model_tensors, write_json, write_safetensors
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import Gemma3Config, Gemma3ForConditionalGeneration

from ltx_jax.pipeline.embedded import GEMMA3_CHAT_TEMPLATE
from ltx_jax.text_encoders.gemma.config import GEMMA3_CONFIG_FOR_LTX as GEMMA_12B

_TINY_GEMMA = {"text_config": {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "head_dim": 8, "query_pre_attn_scalar": 8},
               "vision_config": {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2}}  # fmt: skip


# transformers 5 -> 4.5x Gemma 3 names: the inverse of its conversion mapping ("llava", then SigLIP's vision_model).
GEMMA_LEGACY_PREFIXES = (
    ("model.language_model.", "language_model.model."),
    ("model.vision_tower.", "vision_tower.vision_model."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
)


def gemma_config(layers: int | None = None, *, tiny: bool = False) -> dict[str, Any]:
    """config.json of the Gemma directory: the 12B config ltx-core builds, with `layers` text layers."""
    config = GEMMA_12B.to_dict()
    for name, values in _TINY_GEMMA.items() if tiny else ():
        config[name].update(values)
    if layers is not None:
        config["text_config"]["num_hidden_layers"] = layers
    return config


def plan_gemma(config: Mapping[str, Any]) -> dict[str, Planned]:
    """The Gemma directory's tensors, in the official (transformers 4.5x) names, without the tied lm_head."""
    with torch.device("meta"):
        model = Gemma3ForConditionalGeneration(Gemma3Config.from_dict(dict(config)))
    tied = set(getattr(model, "_tied_weights_keys", None) or ())
    out = {}
    for key, tensor in model_tensors(model).items():
        if key not in tied:
            new, old = next(((n, o) for o, n in GEMMA_LEGACY_PREFIXES if key.startswith(o)), ("", ""))
            out[new + key[len(old) :]] = tensor
    return out


def vocabulary(specials: Mapping[int, str], size: int) -> list[str]:
    """`size` SentencePiece pieces: `specials` at their ids, byte-fallback and character pieces after the chat
    tokens (ids above 106), placeholders elsewhere. Shared by the Gemma 3 and Gemma 4 tokenizers."""
    ordinary = iter([*(f"<0x{b:02X}>" for b in range(256)), "\u2581", *(chr(c) for c in range(33, 127))])
    return [specials.get(i) or (next(ordinary, None) if i > 106 else None) or f"<unused{i}>" for i in range(size)]


def gemma_vocabulary(config: Mapping[str, Any]) -> list[str]:
    """The SentencePiece pieces, one per id below the image token (Gemma's 262,144), Gemma 3's special tokens
    at their ids (`vocabulary`)."""
    specials = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 105: "<start_of_turn>",
                config["eos_token_id"][-1]: "<end_of_turn>", config["boi_token_index"]: "<start_of_image>",
                config["eoi_token_index"]: "<end_of_image>"}  # fmt: skip
    return vocabulary(specials, config["image_token_index"])


def bpe_tokenizer(pieces: Sequence[str], specials: Sequence[str]) -> Tokenizer:
    """A byte-fallback BPE over `pieces` (ids = positions) like Gemma's tokenizer.json, `specials` its special
    tokens; no post-processor (the caller sets one if the tokenizer adds BOS itself)."""
    bpe = models.BPE({p: i for i, p in enumerate(pieces)}, [], unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    tokenizer = Tokenizer(bpe)
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.add_special_tokens(list(specials))
    return tokenizer


def write_tokenizer(root: Path, config: Mapping[str, Any]) -> None:
    """tokenizer.json (a byte-fallback BPE like Gemma's) and tokenizer.model (its pieces as a SentencePiece
    model), tokenizer_config.json, special_tokens_map.json; `<image_soft_token>` is the one added token."""
    from transformers.utils import sentencepiece_model_pb2_new as sp  # noqa: PLC0415

    pieces = gemma_vocabulary(config)
    specials = [p for p in pieces if p.startswith("<") and not p.startswith(("<0x", "<unused"))]
    tokenizer = bpe_tokenizer(pieces, [*specials, "<image_soft_token>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    tokenizer.save(str(root / "tokenizer.json"))
    model, piece = sp.ModelProto(), sp.ModelProto.SentencePiece
    model.trainer_spec.model_type, model.trainer_spec.vocab_size = sp.TrainerSpec.BPE, len(pieces)
    model.trainer_spec.byte_fallback, model.normalizer_spec.name = True, "identity"
    trainer = model.trainer_spec
    trainer.pad_id, trainer.eos_id, trainer.bos_id, trainer.unk_id = 0, 1, 2, 3
    kinds = {"<unk>": piece.UNKNOWN, **dict.fromkeys(specials[1:], piece.CONTROL)}
    for text in pieces:
        model.pieces.add(
            piece=text, score=0.0, type=kinds.get(text, piece.BYTE if text.startswith("<0x") else piece.NORMAL)
        )
    (root / "tokenizer.model").write_bytes(model.SerializeToString())
    named = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
             "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
             "image_token": "<image_soft_token>"}  # fmt: skip
    flags = {"add_bos_token": True, "add_eos_token": False, "spaces_between_special_tokens": False}
    classes = {"tokenizer_class": "GemmaTokenizer", "processor_class": "Gemma3Processor"}
    extra = {"extra_special_tokens": {key: named[key] for key in ("boi_token", "eoi_token", "image_token")}}
    chat = {"chat_template": GEMMA3_CHAT_TEMPLATE}  # Gemma 3's chat format, as the -it directory carries it
    write_json(root / "tokenizer_config.json", {**classes, **named, **flags, **extra, **chat})  # as the official file
    write_json(root / "special_tokens_map.json", named)


def write_gemma(root: Path, config: Mapping[str, Any], seed: int, workers: int, shard_bytes: int) -> None:
    """A Gemma 3 directory as Hugging Face writes one: shards of at most `shard_bytes` and their index."""
    root.mkdir(parents=True, exist_ok=True)
    tensors = plan_gemma(config)
    shards: list[list[str]] = [[]]
    for key in sorted(tensors):
        if shards[-1] and sum(tensors[k].nbytes for k in shards[-1]) + tensors[key].nbytes > shard_bytes:
            shards.append([])
        shards[-1].append(key)
    weight_map = {}
    for i, keys in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(root / name, {k: tensors[k] for k in keys}, {"format": "pt"}, seed, workers)
        weight_map.update(dict.fromkeys(keys, name))
    total = sum(t.nbytes for t in tensors.values())
    write_json(root / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    write_json(root / "config.json", config)
    size = config["vision_config"]["image_size"]
    write_json(root / "preprocessor_config.json", {
        "image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor", "do_resize": True,
        "size": {"height": size, "width": size}, "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255,
        "do_normalize": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3, "do_convert_rgb": None,
        "image_seq_length": config["mm_tokens_per_image"],
    })  # fmt: skip
    write_tokenizer(root, config)
