"""The README's Python example runs as written."""

import pathlib
import re

README = pathlib.Path(__file__).parents[1] / "README.md"


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["svx"].shape == namespace["vx"].shape == (1, 50, 16)
    assert float(abs(namespace["svx"] - namespace["vx"]).max()) <= 1e-5 * float(abs(namespace["vx"]).max())
