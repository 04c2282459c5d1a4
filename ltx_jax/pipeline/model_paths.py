"""Which file each model comes from: one LTX checkpoint, or the per-component files LTX-2.5 ships.

Source: ltx-pipelines 1.2.0 `pipe/utils/model_paths.py`: a single file (`--checkpoint-path`, with `--gemma-root`)
or split files: the transformer (`model.diffusion_model.*`, both text connectors; metadata `config.transformer`,
`model_version`, `gemma_source_checkpoint`), the video VAE (`encoder.*` / `decoder.*` / `per_channel_statistics.*`
or the same under `vae.`; `config.vae`), the audio VAE (`audio_vae.*`, `vocoder.*`; `config.audio_vae`,
`config.vocoder`) and the text encoder (Gemma 4 packed in one file, `gemma_assets.py`). The split files together
hold what one checkpoint holds, under the same keys, so the loaders read their union as they read one file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ltx_jax.convert.safetensors_file import LazyTensor, SafetensorsFile, lazy_tensors, parse_metadata_json

PathLike = str | os.PathLike
# Each split file, the `config` sections its metadata must have, and its flag.
SPLIT_FILES: dict[str, tuple[tuple[str, ...], str]] = {
    "transformer_path": (("transformer",), "--transformer-path"),
    "video_vae_path": (("vae",), "--video-vae-path"),
    "audio_vae_path": (("audio_vae",), "--audio-vae-path"),
}


def checkpoint_tensors(path: PathLike) -> tuple[dict[str, LazyTensor], dict[str, Any]]:
    """A safetensors file's tensors (read on use) and its parsed `config` metadata."""
    file = SafetensorsFile(path)
    config = parse_metadata_json(file.metadata, "config") if "config" in file.metadata else {}
    return lazy_tensors(file), config


def check_split_files(paths: Mapping[str, PathLike | None], optional: tuple[str, ...] = ()) -> None:
    """`paths` (the `SPLIT_FILES` names -> a path or None) all given but the `optional` ones (the video VAE of an
    audio-only flow, which 1.2.0's t2a never asks for), each an existing `.safetensors` whose `config` has its
    sections; raises naming the flag and the fix. Reads the headers only."""
    needed = {name: entry for name, entry in SPLIT_FILES.items() if name not in optional}
    missing = [flag for name, (_, flag) in needed.items() if paths.get(name) is None]
    if missing:
        raise ValueError(
            f"split model files need {', '.join(flag for _, flag in needed.values())} together (as LTX-2.5 "
            f"ships them); missing {', '.join(missing)}."
        )
    for name, (sections, flag) in SPLIT_FILES.items():
        if paths.get(name) is None:
            continue
        path = Path(paths[name])
        if path.suffix != ".safetensors" or not path.is_file():
            raise FileNotFoundError(f"{flag} {os.fspath(path)!r} must be an existing .safetensors file.")
        metadata = SafetensorsFile(path).metadata
        config = parse_metadata_json(metadata, "config") if "config" in metadata else {}
        absent = [s for s in sections if not isinstance(config, dict) or s not in config]
        if absent:
            raise ValueError(
                f"{flag} {os.fspath(path)!r} has no {', '.join(absent)} section in its 'config' metadata: it is not "
                f"the {name.removesuffix('_path').replace('_', ' ')} file. Check which file goes with which flag."
            )


def split_tensors(paths: Mapping[str, PathLike]) -> tuple[dict[str, LazyTensor], dict[str, Any]]:
    """The union of the split files' tensors and of their `config` sections, as one checkpoint holds them (a file
    not given, None, is left out). A key or a section found in two files raises, naming both."""
    tensors: dict[str, LazyTensor] = {}
    config: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for name in SPLIT_FILES:
        if paths.get(name) is None:
            continue
        path = os.fspath(paths[name])
        file_tensors, file_config = checkpoint_tensors(path)
        for kind, found in (("tensor", file_tensors), ("config section", file_config)):
            clash = sorted(set(found) & set(tensors if kind == "tensor" else config))
            if clash:
                raise ValueError(
                    f"{path} and {owner[f'{kind}:{clash[0]}']} both hold the {kind} {clash[0]!r}"
                    f"{f' and {len(clash) - 1} more' if len(clash) > 1 else ''}: pass each component's own file."
                )
            owner.update({f"{kind}:{key}": path for key in found})
        tensors.update(file_tensors)
        config.update(file_config)
    return tensors, config
