"""The README's Python examples run as written."""

import os
import pathlib
import re

from tolerances import SP

README = pathlib.Path(__file__).parents[1] / "README.md"


def test_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the pipeline example writes fox.mp4
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) == 2
    pipeline, dit = ({} for _ in blocks)
    for namespace, block in zip((pipeline, dit), blocks, strict=True):
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert pipeline["frames"].shape == (9, 128, 192, 3)
    assert pipeline["audio"].shape[1] == 2
    assert os.path.getsize(tmp_path / "fox.mp4") > 0
    assert dit["svx"].shape == dit["vx"].shape == (1, 50, 16)
    assert float(abs(dit["svx"] - dit["vx"]).max()) <= SP * float(abs(dit["vx"]).max())
