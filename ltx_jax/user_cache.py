"""The per-user cache folder of ltx-jax (the FFI library builds, `scripts/generate.py`'s compilation cache):
`$LTX_JAX_CACHE_DIR`, else `$XDG_CACHE_HOME/ltx_jax`, else `~/.cache/ltx_jax`."""

import os
from pathlib import Path

CACHE_ENV = "LTX_JAX_CACHE_DIR"


def cache_dir() -> Path:
    """`$LTX_JAX_CACHE_DIR`, else `$XDG_CACHE_HOME/ltx_jax`, else `~/.cache/ltx_jax` (not created)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ltx_jax"
