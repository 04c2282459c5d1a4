"""A stand-in for `torchaudio`, so that the tests can import `ltx_core.model.audio_vae`.

`ltx_core.model.audio_vae.ops` imports torchaudio at module level, but only `AudioProcessor` (the
waveform -> mel front end of the audio *encoder*) uses it. torchaudio is not installed, and must not
be: PyPI's torchaudio pins a different torch. Inside `torchaudio_stand_in()` the names `torchaudio`,
`torchaudio.transforms` and `torchaudio.functional` resolve to empty modules whose attributes raise
`RuntimeError` when called; on exit they are removed from `sys.modules` again, so code that probes
for torchaudio later (e.g. transformers) still sees it absent. A real torchaudio, if present, is used.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator

_SUBMODULES = ("transforms", "functional")


class _Unavailable:
    """A torchaudio attribute: raises on call, naming what was called."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError(
            f"{self._name} was called, but torchaudio is only a test stand-in (tests/torchaudio_stand_in.py): "
            "the audio decoder and vocoders do not need it; only ltx-core's mel front end (AudioProcessor) does."
        )


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)

    def missing(attr: str) -> _Unavailable:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Unavailable(f"{name}.{attr}")

    module.__getattr__ = missing
    return module


@contextlib.contextmanager
def torchaudio_stand_in() -> Iterator[None]:
    """Within the block, `import torchaudio` (and its `transforms`, `functional`) gets the stand-in."""
    if "torchaudio" in sys.modules or importlib.util.find_spec("torchaudio") is not None:
        yield
        return
    root = _module("torchaudio")
    modules = {"torchaudio": root}
    for sub in _SUBMODULES:
        modules[f"torchaudio.{sub}"] = _module(f"torchaudio.{sub}")
        setattr(root, sub, modules[f"torchaudio.{sub}"])
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name in modules:
            sys.modules.pop(name, None)
