"""Test setup, before JAX is imported anywhere: one cache folder for the session, 8 simulated CPU devices
and, on a machine without a GPU, XLA's CPU programs compiled without LLVM's optimisations (tests/cpu_compile.py
says why)."""

import os
import shutil
import tempfile


def share_caches(directory: str) -> None:
    """Every program the session compiles, in this process or in a child (they inherit the environment), is kept
    in `directory`/jax_compilation and read back by the next test that compiles the same program: the tests build
    the same tiny models again and again, in-process and in the commands they run, and compiling is most of their
    time. JAX reads these variables when it is imported. `directory` is also ltx-jax's user cache
    (`ltx_jax.user_cache`), whose `jax_compilation` is the commands' default `--compile-cache-dir`: the same
    folder, and nothing is written to the user's own cache. Processes share it at the same time (pytest-xdist's
    workers, the commands the tests start): a program read while another process still writes it fails to
    load, which JAX reports as a warning and compiles anew. (A size limit would put JAX's file lock around every
    read and write, but then each write also reads every entry's access time: quadratic in the entries, minutes
    of system time in a full run.)"""
    os.environ["LTX_JAX_CACHE_DIR"] = directory
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(directory, "jax_compilation")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


# pytest-xdist's workers inherit the environment of the process that starts them: one folder for all of them,
# made and removed by that first process.
OWNS_SESSION_CACHE = "LTX_JAX_TESTS_SESSION_CACHE" not in os.environ
if OWNS_SESSION_CACHE:
    os.environ["LTX_JAX_TESTS_SESSION_CACHE"] = tempfile.mkdtemp(prefix="ltx-jax-tests-cache-")
SESSION_CACHE = os.environ["LTX_JAX_TESTS_SESSION_CACHE"]
share_caches(SESSION_CACHE)

from cpu_compile import set_xla_flags  # noqa: E402 - imports JAX, after the cache settings above

set_xla_flags(8)

import sys  # noqa: E402 - after the JAX settings above

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


def pytest_sessionfinish() -> None:
    if OWNS_SESSION_CACHE:
        shutil.rmtree(SESSION_CACHE, ignore_errors=True)
