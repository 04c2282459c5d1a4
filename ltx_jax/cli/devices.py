"""Before JAX's backends start: simulated CPU devices for machines without an accelerator (or with `--cpu`).

An entry point may configure JAX (library code never does). JAX reads the host platform's device
count (`XLA_FLAGS`) and its platforms when it starts its backends, at the first device query, not at
`import jax`: the scripts call this after their imports and before anything asks for a device.
"""

import os
import shutil
import subprocess


def has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode == 0


def simulate_cpu_devices_if_needed(count: int, force_cpu: bool) -> bool:
    """Gives JAX's CPU platform `count` devices, and with `force_cpu` makes it the only platform.

    The device count only affects the CPU platform, so it is set everywhere: a machine without an
    accelerator then has a `count`-device mesh, while GPU and TPU machines keep using theirs.
    Returns whether the run is (certainly) on the CPU.
    """
    import jax  # noqa: PLC0415 - importing jax starts no backend

    flag = f"--xla_force_host_platform_device_count={count}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    if force_cpu:
        jax.config.update("jax_platforms", "cpu")
    return force_cpu or not has_gpu()
