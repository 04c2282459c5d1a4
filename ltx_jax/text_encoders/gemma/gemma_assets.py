"""A Gemma text encoder's config, tokenizer and weights, from a Hugging Face directory or one packed file.

Source: ltx-core 1.2.0 `text_encoders/gemma/gemma_assets.py` (`GemmaAssets`). LTX-2.5 ships its text encoder as
one `.safetensors` file: the Hugging Face config JSON in the metadata key `gemma_config`, `tokenizer.json` as the
uint8 tensor `tokenizer_json`, the other JSON sidecars as `hf_asset__<name>` tensors (or, in older packs, metadata
strings), the weights, and the feature extractor's `text_embedding_projection.*`. A directory holds the same as
files: the first `config.json` and `tokenizer.json` below it, every other `*.json` as a sidecar, and the weights
of `gemma_weight_paths`. `tokenizer_config.json` and `processor_config.json` are required in both, as upstream.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from ltx_jax.convert.dit_tensors import parse_model_version
from ltx_jax.convert.safetensors_file import LazyTensor, SafetensorsFile, lazy_tensors
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import gemma_weight_paths
from ltx_jax.text_encoders.gemma.tokenizer import TOKENIZER_MAX_LENGTH, LTXGemmaTokenizer

GEMMA_CONFIG_METADATA_KEY = "gemma_config"
TOKENIZER_JSON_TENSOR_KEY = "tokenizer_json"
HF_ASSET_TENSOR_PREFIX = "hf_asset__"
REQUIRED_SIDECARS = ("tokenizer_config.json", "processor_config.json")
_METADATA_FALLBACK_SIDECARS = (*REQUIRED_SIDECARS, "chat_template.jinja", "generation_config.json")


@dataclasses.dataclass(frozen=True)
class GemmaAssets:
    """What a Gemma text encoder is built from; `source` is the path it was read from (named in errors)."""

    source: str
    config: Mapping[str, Any]
    tokenizer_json: bytes
    sidecars: Mapping[str, bytes]
    weight_paths: tuple[Path, ...]

    def __post_init__(self) -> None:
        missing = [name for name in REQUIRED_SIDECARS if name not in self.sidecars]
        if missing:
            raise ValueError(
                f"Gemma assets from {self.source!r} lack {', '.join(missing)}: a packed text-encoder file stores "
                f"each as a `{HF_ASSET_TENSOR_PREFIX}<name>` tensor, a Gemma directory as a file."
            )

    @classmethod
    def load(cls, path: str | Path) -> GemmaAssets:
        """From a Gemma directory or a packed `.safetensors` text-encoder file."""
        path = Path(path)
        if path.is_dir():
            return cls.from_root(path)
        if path.is_file() and path.suffix == ".safetensors":
            return cls.from_single_file(path)
        raise FileNotFoundError(
            f"Gemma path {str(path)!r} is neither a directory nor a .safetensors file; pass the text encoder's "
            "file or its Hugging Face directory."
        )

    @classmethod
    def from_root(cls, root: Path) -> GemmaAssets:
        def first(name: str) -> Path:
            found = next(iter(sorted(root.rglob(name))), None)
            if found is None:
                raise FileNotFoundError(f"Gemma directory {str(root)!r} holds no {name}.")
            return found

        sidecars: dict[str, bytes] = {}
        for pattern in ("*.json", "*.jinja"):
            for file in sorted(root.rglob(pattern)):
                if file.is_file() and file.name not in ("config.json", "tokenizer.json"):
                    sidecars.setdefault(file.name, file.read_bytes())
        return cls(
            source=str(root),
            config=json.loads(first("config.json").read_bytes()),
            tokenizer_json=first("tokenizer.json").read_bytes(),
            sidecars=sidecars,
            weight_paths=gemma_weight_paths(root),
        )

    @classmethod
    def from_single_file(cls, path: Path) -> GemmaAssets:
        file = SafetensorsFile(path)
        if GEMMA_CONFIG_METADATA_KEY not in file.metadata:
            raise ValueError(
                f"{path} has no metadata key {GEMMA_CONFIG_METADATA_KEY!r} (the Hugging Face config as JSON): it "
                "is not a packed Gemma text-encoder file. Pass the text encoder's file (--text-encoder-path)."
            )
        if TOKENIZER_JSON_TENSOR_KEY not in file:
            raise ValueError(f"{path} has no tensor {TOKENIZER_JSON_TENSOR_KEY!r}: its tokenizer is missing.")
        sidecars = {
            key.removeprefix(HF_ASSET_TENSOR_PREFIX): file.read(key).tobytes()
            for key in file.keys()
            if key.startswith(HF_ASSET_TENSOR_PREFIX)
        }
        for name in _METADATA_FALLBACK_SIDECARS:
            if name not in sidecars and name in file.metadata:
                sidecars[name] = file.metadata[name].encode()
        return cls(
            source=str(path),
            config=json.loads(file.metadata[GEMMA_CONFIG_METADATA_KEY]),
            tokenizer_json=file.read(TOKENIZER_JSON_TENSOR_KEY).tobytes(),
            sidecars=sidecars,
            weight_paths=(path,),
        )

    def sidecar_json(self, name: str) -> dict[str, Any]:
        return json.loads(self.sidecars[name])

    def tokenizer(self, max_length: int = TOKENIZER_MAX_LENGTH) -> LTXGemmaTokenizer:
        """The prompt tokenizer: `tokenizer.json` with the special tokens of `tokenizer_config.json`."""
        tokenizer = Tokenizer.from_str(self.tokenizer_json.decode())
        return LTXGemmaTokenizer(tokenizer, self.sidecar_json("tokenizer_config.json"), max_length)

    def lazy_tensors(self) -> dict[str, LazyTensor]:
        """Key -> tensor read on use, over every weight file (the packed assets included)."""
        tensors: dict[str, LazyTensor] = {}
        for path in self.weight_paths:
            tensors.update(lazy_tensors(SafetensorsFile(path)))
        return tensors


# From this model_version on a transformer must say which Gemma it was trained with (ltx-core 1.2.0's
# `_GEMMA_SOURCE_CHECKPOINT_REQUIRED_SINCE`, below LTX-2.5's 2.5.0 so that pre-release files are covered).
GEMMA_SOURCE_CHECKPOINT_REQUIRED_SINCE = (2, 4, 0)


def check_gemma_version(
    transformer_metadata: Mapping[str, str], gemma_config: Mapping[str, Any], *, transformer: str, text_encoder: str
) -> None:
    """The text encoder is the one the transformer was trained with (ltx-core 1.2.0's `_check_gemma_version`).

    A transformer whose metadata has `gemma_source_checkpoint` (LTX-2.5) needs its `gemma_version` in the
    encoder's config; one without it needs a Gemma 3 encoder, unless its `model_version` is 2.4.0 or later,
    where the key is required (upstream warns and goes on if neither file names a version; so does this).
    `transformer` and `text_encoder` are the paths named in the error."""
    source, model_version = (
        transformer_metadata.get("gemma_source_checkpoint"),
        transformer_metadata.get("model_version"),
    )
    found = gemma_config.get("gemma_version")
    if source is not None:
        expected = json.loads(source).get("gemma_version") if isinstance(source, str) else source.get("gemma_version")
        if expected != found:
            raise ValueError(
                f"the transformer {transformer} was trained with Gemma {expected!r} (gemma_source_checkpoint), but "
                f"the text encoder {text_encoder} is {found!r} (gemma_version); pass the text encoder released with "
                "this transformer."
            )
        return
    if model_version is not None and parse_model_version(model_version) >= GEMMA_SOURCE_CHECKPOINT_REQUIRED_SINCE:
        if found is None:
            warnings.warn(
                f"neither {transformer} (model_version {model_version}) nor {text_encoder} names a Gemma version; "
                "check that they belong together.",
                stacklevel=2,
            )
            return
        raise ValueError(
            f"the transformer {transformer} (model_version {model_version}) names no gemma_source_checkpoint, which "
            f"LTX {'.'.join(map(str, GEMMA_SOURCE_CHECKPOINT_REQUIRED_SINCE))} and later need, while the text encoder "
            f"{text_encoder} is {found!r}; pass the transformer file as released."
        )
    if gemma_config.get("model_type") not in ("gemma3", "gemma3_text"):
        raise ValueError(
            f"the transformer {transformer} (model_version {model_version}) takes a Gemma 3 text encoder, but "
            f"{text_encoder} is {gemma_config.get('model_type')!r}; pass --gemma-root with the Gemma 3 directory."
        )
