"""Runs ltx-pipelines 1.2.0's `python -m ltx_pipelines.distilled` with the given flags, where torchvision's
compiled operators cannot load.

1.2.0's Gemma 4 processor imports torchvision's transforms, and torchvision registers fake kernels for its
`nms` and `qnms` operators at import whether or not its compiled library loaded; when it did not (a wheel built
for another CUDA than the torch beside it), the import fails. The pipeline uses neither operator, so declaring
the two schemas is enough. Nothing else changes.
"""

import importlib.util
import runpy
import sys
from pathlib import Path

import torch

_LIBRARIES: list[torch.library.Library] = []  # a Library's definitions last as long as the object


def _declare_torchvision_ops_if_missing() -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    try:
        torch.ops.load_library(str(Path(spec.origin).parent / "_C.so"))
    except (OSError, RuntimeError):
        library = torch.library.Library("torchvision", "DEF")
        for name in ("nms", "qnms"):
            library.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIBRARIES.append(library)


if __name__ == "__main__":
    _declare_torchvision_ops_if_missing()
    sys.argv = ["ltx_pipelines.distilled", *sys.argv[1:]]
    runpy.run_module("ltx_pipelines.distilled", run_name="__main__")
