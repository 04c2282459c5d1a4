"""A wheel of ltx-jax, installed (not editable) into a fresh virtual environment, generates from the
embedded default and finds or names the CUDA all-to-all library.

The fresh environment gets the wheel alone (`--no-deps`); its dependencies are made visible by a
`.pth` path to this environment's site-packages, whose own `.pth` files (among them the editable
install of the checkout) are not processed there, so `import ltx_jax` can only find the wheel.
"""

import os
import pathlib
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

from cpu_compile import xla_flags

ROOT = pathlib.Path(__file__).parents[1]

PROGRAM = textwrap.dedent(
    """
    import os, sys
    import ltx_jax
    from ltx_jax.parallel import make_mesh
    assert ltx_jax.__file__.startswith(sys.prefix), ltx_jax.__file__  # the installed wheel
    out = ltx_jax.LTXPipeline.embedded(mesh=make_mesh(2))("a fox", height=64, width=64, num_frames=9,
                                                           num_inference_steps=2)
    out.save("fox.mp4")
    print("frames", out.video.shape, "audio", out.audio.shape, os.path.getsize("fox.mp4") > 0)
    from ltx_jax.ffi import paths
    try:
        print("ffi library", paths.find_library())
    except RuntimeError as error:
        print("ffi missing:", error)
    """
)


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def test_wheel_in_a_fresh_venv_generates_and_names_the_ffi_build(tmp_path):
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("ltx_jax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ltx_jax/ffi/csrc/all2all.cu" in names  # the CUDA sources ship as package data
    assert not any(name.startswith(("tests/", "scripts/", "benchmarks/")) for name in names)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)])
    fresh_site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    (pathlib.Path(fresh_site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": xla_flags(2),
        "LTX_JAX_CACHE_DIR": str(tmp_path / "cache"),  # no FFI build there: "ffi missing" below
        # the session's compilation cache (conftest.py)
        **{
            name: value
            for name, value in os.environ.items()
            if name.startswith(("JAX_PERSISTENT_CACHE_", "JAX_COMPILATION_CACHE_"))
        },
    }
    output = run([str(python), "-c", PROGRAM], cwd=tmp_path, env=env)
    assert "frames (9, 64, 64, 3) audio" in output
    assert "True" in output
    assert "ffi missing:" in output
    assert "python -m ltx_jax.ffi.build" in output
