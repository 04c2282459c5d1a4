"""The benchmarks' `--variant NAME:KEY=VALUE[,KEY=VALUE]` (extra XLA options for a row): a malformed value is
refused with an error naming the flag, before a model is built."""

import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _script(name: str):  # noqa: ANN202 - a module loaded from its path
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import bench_step from beside them
    try:
        spec = importlib.util.spec_from_file_location(f"_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("text", ["heuristics", "heuristics:", ":xla_gpu_autotune_level=0", "h:xla_gpu_autotune_level"])
def test_malformed_variant_names_the_flag(text: str) -> None:
    with pytest.raises(SystemExit, match="--variant"):
        _script("bench_step").parse_variant(text)


def test_variant_values_typed_and_added_to_the_dit_options() -> None:
    bench_step = _script("bench_step")
    name, options = bench_step.parse_variant("h:xla_gpu_autotune_level=0,xla_gpu_enable_cublaslt=true")
    assert name == "h"
    assert options == {
        **bench_step.COMPILER_OPTIONS,
        "xla_gpu_autotune_level": 0,
        "xla_gpu_enable_cublaslt": True,
    }


def test_loop_step_refuses_a_malformed_variant_before_building_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_step = _script("bench_loop_step")

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a model was built before --variant was checked")

    monkeypatch.setattr(loop_step.bench_step, "torch_reference", refuse)
    monkeypatch.setattr(sys, "argv", ["bench_loop_step.py", "--device", "cpu", "--variant", "heuristics"])
    with pytest.raises(SystemExit, match="--variant"):
        loop_step.main()
