"""`ltx-jax generate`'s prompt flags: the --prompt / --prompts-file list, --prompt-embeddings files, and
--enhance-prompt's checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_PROMPT = "A red fox trots through fresh snow at dawn, birds singing."


def load_prompt_embeddings(path: Path) -> tuple[Any, Any]:
    """An .npz with `video` and/or `audio` (1, S, D) and optionally `negative_video`/`negative_audio`."""
    import numpy as np  # noqa: PLC0415

    from ltx_jax.pipeline import PromptEmbeddings  # noqa: PLC0415

    if not path.is_file():
        raise FileNotFoundError(f"--prompt-embeddings {path} does not exist.")
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    unknown = set(arrays) - {"video", "audio", "negative_video", "negative_audio"}
    if unknown or not ({"video", "audio"} & set(arrays)):
        raise ValueError(
            f"--prompt-embeddings {path} holds {sorted(arrays)}; expected 'video' and/or 'audio' (1, S, D) "
            "arrays, optionally 'negative_video' and 'negative_audio'."
        )
    prompt = PromptEmbeddings(arrays.get("video"), arrays.get("audio"))
    has_negative = "negative_video" in arrays or "negative_audio" in arrays
    negative = PromptEmbeddings(arrays.get("negative_video"), arrays.get("negative_audio")) if has_negative else None
    return prompt, negative


def check_enhance_prompt(args: argparse.Namespace, files: Any, settings: Any) -> None:  # noqa: ANN401
    """--enhance-prompt's needs (and --prompt-enhancer-gemma-root's), before anything is loaded: text prompts, a
    Gemma 3, the system prompts."""
    from ltx_jax.text_encoders.gemma.prompt_enhancer import check_enhancement  # noqa: PLC0415

    if not args.enhance_prompt:
        raise ValueError("--prompt-enhancer-gemma-root rewrites prompts for --enhance-prompt: add it, or drop this.")

    if args.prompt_embeddings is not None:
        raise ValueError(
            "--enhance-prompt rewrites text prompts, and --prompt-embeddings gives encoded ones: drop one of them."
        )
    enhancer = None if files is None else files.prompt_enhancer_gemma_root or files.gemma_root
    if files is not None and enhancer is None:
        raise ValueError(
            "--enhance-prompt runs Gemma 3, and LTX-2.5's Gemma 4 text encoder (--text-encoder-path) cannot generate "
            "text: add --prompt-enhancer-gemma-root GEMMA_DIR (gemma-3-12b-it)."
        )
    check_enhancement(enhancer, with_image=bool(settings.images))


def prompts_of(args: argparse.Namespace) -> list[str]:
    """--prompt (repeatable) and the lines of --prompts-file, in that order; the default prompt if neither."""
    prompts = list(args.prompt or [])
    if any(not prompt.strip() for prompt in prompts):
        raise ValueError(f"--prompt must be non-empty text, got {next(p for p in prompts if not p.strip())!r}.")
    if args.prompts_file is not None:
        if not args.prompts_file.is_file():
            raise FileNotFoundError(f"--prompts-file {args.prompts_file} does not exist.")
        prompts += [line.strip() for line in args.prompts_file.read_text().splitlines() if line.strip()]
        if not prompts:
            raise ValueError(f"--prompts-file {args.prompts_file} holds no prompt (one per line).")
    if prompts and args.prompt_embeddings is not None:
        raise ValueError("--prompt-embeddings replaces the text prompts: drop --prompt and --prompts-file.")
    return prompts or [DEFAULT_PROMPT]
