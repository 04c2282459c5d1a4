"""Prompt embeddings cached on disk, so a repeated prompt skips Gemma and the embeddings processor.

One `.npz` per entry in `cache_dir`, named by the SHA-256 of (prompt text, checkpoint identity,
tokenizer max length, cache format). The checkpoint identity must change whenever the Gemma
weights or the LTX checkpoint holding the embeddings processor change; `checkpoint_identity`
derives one from the files cheaply (names, sizes, and their first and last MiB). Entries are
written to a temporary file and renamed, so a crashed run never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import jax.numpy as jnp
import numpy as np

CACHE_FORMAT = 1  # bump when what an entry holds changes
_SAMPLE_BYTES = 2**20
_IDENTITY_SUFFIXES = (".safetensors", ".json", ".model")


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _IDENTITY_SUFFIXES)
    raise FileNotFoundError(f"checkpoint path {str(path)!r} does not exist.")


def checkpoint_identity(*paths: str | os.PathLike) -> str:
    """A hex digest of the weights/tokenizer files at `paths` (files, or directories scanned for
    .safetensors/.json/.model): each file's relative name, size, first and last MiB."""
    digest = hashlib.sha256()
    for root in map(Path, paths):
        for file in _files(root):
            size = file.stat().st_size
            digest.update(f"{file.relative_to(root) if root.is_dir() else file.name}\0{size}\0".encode())
            with open(file, "rb") as f:
                digest.update(f.read(_SAMPLE_BYTES))
                f.seek(max(size - _SAMPLE_BYTES, 0))
                digest.update(f.read(_SAMPLE_BYTES))
    return digest.hexdigest()


class PromptCache:
    """`load(prompt)` -> the stored arrays or None; `save(prompt, arrays)` stores them (float32/int32)."""

    def __init__(self, cache_dir: str | os.PathLike, *, checkpoint_id: str, max_length: int) -> None:
        if not checkpoint_id:
            raise ValueError("checkpoint_id must identify the weights (see checkpoint_identity); got an empty string.")
        self.cache_dir, self.checkpoint_id, self.max_length = Path(cache_dir).expanduser(), checkpoint_id, max_length

    def path(self, prompt: str) -> Path:
        key = json.dumps([prompt, self.checkpoint_id, self.max_length, CACHE_FORMAT])
        return self.cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()}.npz"

    def load(self, prompt: str) -> dict[str, np.ndarray] | None:
        path = self.path(prompt)
        if not path.is_file():
            return None
        with np.load(path) as data:
            return {name: data[name] for name in data.files}

    def save(self, prompt: str, arrays: Mapping[str, np.ndarray]) -> Path:
        """Stores `arrays` (float ones as float32: bf16 round-trips exactly) under `prompt`'s key."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        stored = {name: _storable(np.asarray(value)) for name, value in arrays.items()}
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, suffix=".npz.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **stored)
            os.replace(tmp, self.path(prompt))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(prompt)


def _storable(array: np.ndarray) -> np.ndarray:
    """float32 for any float (bfloat16 included, which numpy alone does not call floating), else int32."""
    return array.astype(np.float32 if jnp.issubdtype(array.dtype, jnp.floating) else np.int32)
