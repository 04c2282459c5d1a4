"""One of two processes (4 CPU devices each) that together run SequenceParallel on an 8-device mesh.

Usage: python multiprocess_worker.py PORT PROCESS_ID OUT_DIR MODEL_TYPE TOKENS
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, process_id, out_dir, model_type, tokens = sys.argv[1:6]
process_id, tokens = int(process_id), int(tokens)
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id, initialization_timeout=60)

from multiprocess_case import build_case  # noqa: E402

from ltx_jax.parallel import SequenceParallel, make_mesh  # noqa: E402

model, video, audio = build_case(model_type, tokens)
vx, ax = SequenceParallel(model, make_mesh(8))(video, audio)
# Outputs are replicated: each process reads its own copy, nothing crosses hosts.
np.savez(
    os.path.join(out_dir, f"process{process_id}.npz"),
    video=np.asarray(vx.addressable_data(0)),
    **({} if ax is None else {"audio": np.asarray(ax.addressable_data(0))}),
)
