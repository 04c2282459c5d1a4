"""Ships the repository's top-level `csrc/` (the CUDA all-to-all's sources) inside the package as `ltx_jax/ffi/csrc/`.

Everything else about the build is in pyproject.toml. `python -m ltx_jax.ffi.build` compiles the sources from
the installed package, so `build_py` adds them to `ltx_jax.ffi`'s package data: the files of `csrc/` that match
the `[tool.setuptools.package-data] "ltx_jax.ffi"` patterns (`csrc/*.cu`, ..., read from the repository root).
Being package data, they also go into the sdist and, in a strict editable install, into its link tree. A
(default) editable install leaves them where they are; `ltx_jax.ffi.paths` finds them in the checkout.
"""

import os
from glob import glob

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "ltx_jax.ffi"


class BuildPyWithCsrc(build_py):
    """`build_py` whose data files also hold the top-level `csrc/` files, built into `ltx_jax/ffi/csrc/`."""

    def _csrc_data_files(self) -> tuple[str, str, str, list[str]]:
        """(package, source folder, build folder, file names), as build_py's own data file entries are."""
        patterns = self.package_data.get(PACKAGE, [])
        names = {name for pattern in patterns for name in glob(pattern, root_dir=ROOT)}
        filenames = sorted(name for name in names if os.path.isfile(os.path.join(ROOT, name)))
        src_dir = os.path.relpath(ROOT)
        src_dir = "" if src_dir == os.curdir else src_dir  # from the root: "csrc/x.cu", as the sdist lists it
        return PACKAGE, src_dir, os.path.join(self.build_lib, *PACKAGE.split(".")), filenames

    def _get_data_files(self) -> list[tuple[str, str, str, list[str]]]:
        return [*super()._get_data_files(), self._csrc_data_files()]

    def get_data_files_without_manifest(self) -> list[tuple[str, str, str, list[str]]]:
        return [*super().get_data_files_without_manifest(), self._csrc_data_files()]


setup(cmdclass={"build_py": BuildPyWithCsrc})
