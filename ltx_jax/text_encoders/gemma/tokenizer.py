"""Prompt -> Gemma token ids, left-padded to a fixed length, with a leading BOS.

Source: upstream ltx-core `text_encoders/gemma/tokenizer.py` (`LTXGemmaTokenizer`) over the
tokenizer that `gemma_assets.build_gemma_hf_tokenizer` builds: `tokenizer.json` as the
`tokenizers` library reads it, plus the special tokens and `add_bos_token`/`add_eos_token` of
`tokenizer_config.json`. Steps, as there: strip the text, encode with special tokens and
truncation to `max_length`, prepend BOS if the tokenizer did not (Gemma 3 adds it itself; ltx-core
1.0.0's `LTXVGemmaTokenizer` did not ensure it), left-pad with the pad token (EOS when the
config has none) and return the 0/1 mask. Only the light `tokenizers` package is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, processors

TOKENIZER_MAX_LENGTH = 1024  # ltx-core's production length


def token_text(value: str | Mapping[str, Any] | None) -> str | None:
    """A special token from tokenizer_config.json: a string or an AddedToken dict with `content`."""
    return value["content"] if isinstance(value, Mapping) else value


class LTXGemmaTokenizer:
    """`tokenize(prompts)` -> ids and mask (B, max_length) int32, left-padded; see the module docstring."""

    def __init__(self, tokenizer: Tokenizer, config: Mapping[str, Any], max_length: int = TOKENIZER_MAX_LENGTH) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {max_length}.")
        self.tokenizer, self.max_length = tokenizer, max_length
        bos, eos = token_text(config.get("bos_token")), token_text(config.get("eos_token"))
        pad = token_text(config.get("pad_token")) or eos
        self.bos_token_id, self.pad_token_id = self._id("bos_token", bos), self._id("pad_token (or eos_token)", pad)
        if "add_bos_token" in config or "add_eos_token" in config:
            # transformers rebuilds the post-processor from these flags when the config sets them.
            add_bos, add_eos = config.get("add_bos_token", False), config.get("add_eos_token", False)
            specials = [(bos, self.bos_token_id)] if add_bos else []
            specials += [(eos, self._id("eos_token", eos))] if add_eos else []
            single = " ".join([*([f"{bos}:0"] if add_bos else []), "$A:0", *([f"{eos}:0"] if add_eos else [])])
            tokenizer.post_processor = processors.TemplateProcessing(single=single, special_tokens=specials)
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length)

    def _id(self, name: str, token: str | None) -> int:
        token_id = None if token is None else self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(
                f"tokenizer {name} {token!r} is not in tokenizer.json's vocabulary; set it in tokenizer_config.json."
            )
        return token_id

    @classmethod
    def from_root(cls, gemma_root: str | Path, max_length: int = TOKENIZER_MAX_LENGTH) -> LTXGemmaTokenizer:
        """From the first `tokenizer.json` below `gemma_root` and the `tokenizer_config.json` beside it."""
        path = next(iter(sorted(Path(gemma_root).rglob("tokenizer.json"))), None)
        if path is None:
            raise FileNotFoundError(
                f"gemma_root {str(gemma_root)!r} holds no tokenizer.json; pass the Gemma directory."
            )
        config_path = path.parent / "tokenizer_config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"{config_path} is missing; the tokenizer needs its special tokens.")
        return cls(Tokenizer.from_file(str(path)), json.loads(config_path.read_text()), max_length)

    def token_ids(self, text: str) -> list[int]:
        """The unpadded ids of one prompt: stripped, truncated to `max_length`, BOS first."""
        ids = self.tokenizer.encode(text.strip()).ids
        if not ids or ids[0] != self.bos_token_id:
            ids = [self.bos_token_id, *ids][: self.max_length]
        return ids

    def tokenize(self, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Prompts -> (ids, mask), both (B, max_length) int32; padding on the left, mask 0 there."""
        if isinstance(prompts, str):
            raise TypeError("prompts must be a list of strings; wrap a single prompt as [prompt].")
        ids = np.full((len(prompts), self.max_length), self.pad_token_id, np.int32)
        mask = np.zeros((len(prompts), self.max_length), np.int32)
        for row, text in enumerate(prompts):
            tokens = self.token_ids(text)
            ids[row, self.max_length - len(tokens) :] = tokens
            mask[row, self.max_length - len(tokens) :] = 1
        return ids, mask

    def tokenize_with_weights(self, text: str) -> dict[str, list[tuple[int, int]]]:
        """ltx-core's format: `{"gemma": [(token id, mask), ...]}` of length `max_length`."""
        ids, mask = self.tokenize([text])
        return {"gemma": list(zip(ids[0].tolist(), mask[0].tolist(), strict=True))}
