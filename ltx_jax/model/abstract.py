"""Modules with shape-only parameters (`jax.ShapeDtypeStruct`s), built to load weights into.

Every loader builds one before it reads a tensor, so its cost is paid on every load. Two costs of
flax 0.12 dominate it and both are avoided here (the 48-block LTX-2.3 DiT: 0.70-0.75 s -> 0.28-0.37 s on
an H100 machine's host, `benchmarks/bench_abstract.py`, benchmarks/results/2026-12-05/README.md "Tenth round"):
- `nnx.Rngs` under `nnx.eval_shape`: each draw advances a traced counter, and `Variable.set_value`
  reads `.sharding` of the traced value, which formats an error message (with its source location)
  before `getattr` falls back: most of the time one block took to trace. The modules here only call
  `rngs.params()`, and under `eval_shape` its key only has to have the right type.
- `nnx.clone` per repeated layer splits and merges the layer's graph each time; one `nnx.split` and
  an `nnx.merge(copy=True)` per copy splits it once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
from flax import nnx

M = TypeVar("M", bound=nnx.Module)


class ShapeOnlyRngs:
    """Stands in for `nnx.Rngs` while a module is built under `nnx.eval_shape`: `params()` returns the
    same key every time (the values it would seed are never computed). Only the `params` stream exists,
    the one every module here draws from; any other raises `AttributeError`."""

    def __init__(self) -> None:
        self._key = jax.random.key(0)

    def params(self) -> jax.Array:
        return self._key


def abstract_module(build: Callable[[nnx.Rngs], M]) -> M:
    """`build(rngs)` under `nnx.eval_shape`, with `ShapeOnlyRngs` for `rngs`."""
    return nnx.eval_shape(lambda: build(ShapeOnlyRngs()))


def repeated(first: M, count: int) -> nnx.List:
    """`first` followed by `count - 1` copies of it, each with variables of its own."""
    graphdef, state = nnx.split(first)
    return nnx.List([first, *(nnx.merge(graphdef, state, copy=True) for _ in range(count - 1))])
