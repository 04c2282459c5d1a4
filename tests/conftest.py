"""Test setup: 8 simulated CPU devices, set before JAX is imported anywhere; on a machine without a GPU,
XLA's CPU programs compiled without LLVM's optimisations (tests/cpu_compile.py says why)."""

from cpu_compile import set_xla_flags

set_xla_flags(8)

import sys  # noqa: E402 - after the device flags above

import pytest  # noqa: E402


class ModelBuildAttempted(AssertionError):
    """A run reached model building: every argument check had passed."""


@pytest.fixture
def no_model_building(monkeypatch: pytest.MonkeyPatch) -> type[ModelBuildAttempted]:
    """Building models (the embedded default, checkpoint files) raises `ModelBuildAttempted`, so a test can
    show its bad input was refused before then; returns the class, for tests where reaching it is a pass."""
    from ltx_jax.pipeline import embedded, model_ledger  # noqa: PLC0415 - JAX starts after the flags above

    def refuse(*_: object, **__: object) -> None:
        raise ModelBuildAttempted("models were built before the arguments were checked")

    for module in (embedded, model_ledger, sys.modules["ltx_jax.pipeline.ltx_pipeline"]):
        for name in ("embedded_models", "load_models"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    return ModelBuildAttempted
