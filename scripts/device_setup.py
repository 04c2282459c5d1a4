"""Before JAX starts: simulated CPU devices when no GPU is present (or `--cpu` asks for them).

An entry point may configure JAX (library code never does); the device count of the host platform
can only be set before `import jax`, which is why this module imports nothing from jax.
"""

import os
import shutil
import subprocess


def has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode == 0


def simulate_cpu_devices_if_needed(count: int, force_cpu: bool) -> bool:
    """Gives the CPU `count` devices when there is no GPU or `force_cpu`; returns whether it did."""
    if not (force_cpu or not has_gpu()):
        return False
    os.environ["JAX_PLATFORMS"] = "cpu"
    flag = f"--xla_force_host_platform_device_count={count}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    return True
