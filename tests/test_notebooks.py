"""The notebooks run top to bottom and are stored without outputs.

Each notebook runs in a fresh kernel of the current interpreter (so the notebook's own first cell sets up
the 8 simulated CPU devices before JAX starts); a cell that raises fails the test. Needs the `notebook`
extra (`pip install -e ".[notebook]"`), which .ci/run installs.
"""

import json
import pathlib
import sys

import pytest

nbclient = pytest.importorskip(
    "nbclient", reason='executing notebooks needs the notebook extra: pip install -e ".[notebook]"'
)
nbformat = pytest.importorskip("nbformat", reason='the notebook extra is missing: pip install -e ".[notebook]"')
pytest.importorskip("ipykernel", reason='the notebook extra is missing: pip install -e ".[notebook]"')
pytest.importorskip("matplotlib", reason='the notebook extra is missing: pip install -e ".[notebook]"')
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402 - nbclient's dependency
from jupyter_client.manager import KernelManager  # noqa: E402

NOTEBOOKS = sorted((pathlib.Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # the slowest cell (the generation) takes well under a minute on a 2-core machine


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/*.ipynb not found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    with_outputs = [i for i, cell in enumerate(notebook.cells) if cell.get("outputs") or cell.get("execution_count")]
    assert not with_outputs, f"{path.name}: cells {with_outputs} keep outputs; clear them before committing"


def current_interpreter_kernel(tmp_path: pathlib.Path) -> KernelManager:
    """A kernel spec running ipykernel on this interpreter, whatever kernels the machine has installed."""
    spec = tmp_path / "kernels" / "ltx-jax-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "ltx-jax test", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(spec.parent)], ensure_native_kernel=False)
    return KernelManager(kernel_name="ltx-jax-test", kernel_spec_manager=specs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        km=current_interpreter_kernel(tmp_path),
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(path.parent)}},  # the working directory, as `jupyter lab` has it
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    errors = [output for cell in notebook.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors
