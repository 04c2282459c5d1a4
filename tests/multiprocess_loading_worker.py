"""One of two processes (4 CPU devices each) that load a checkpoint onto their common 8-device mesh.

Usage: python multiprocess_loading_worker.py PORT PROCESS_ID SAFETENSORS CONVERTED_DIR OUT_DIR FP8_SAFETENSORS

Loads SAFETENSORS with `shard_weights=True` and replicated, CONVERTED_DIR with `shard_weights=True`, then
with `quantization="fp8"`: SAFETENSORS sharded (kernels split over both processes: quantized once the model
is whole, on the main thread) and replicated (each kernel quantized as it is placed), and FP8_SAFETENSORS
(fp8 kernels with their scales) sharded, kept as stored. Counts the bytes every read of the safetensors
file asks for. Writes OUT_DIR/process{i}.npz (per load and parameter, a full-size float32 array holding
this process's shards and NaN elsewhere) and OUT_DIR/process{i}.json (bytes read per load).
"""

import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, process_id, src, converted, out_dir, fp8_src = sys.argv[1:7]
process_id = int(process_id)
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id, initialization_timeout=60)

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

import ltx_jax  # noqa: E402
from ltx_jax.convert import safetensors_file  # noqa: E402
from ltx_jax.parallel import make_mesh  # noqa: E402

bytes_read = [0]
read_range = safetensors_file._read_range


def counting_read_range(f, offset, out):  # every byte a SafetensorsFile reads passes through _read_range
    bytes_read[0] += len(out)
    read_range(f, offset, out)


safetensors_file._read_range = counting_read_range


def holdings(model: ltx_jax.LTXModel) -> dict[str, np.ndarray]:
    """Parameter path -> full-size array with this process's shards filled in and NaN elsewhere."""
    held = {}
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = variable.get_value()
        full = np.full(value.shape, np.nan, np.float32)
        for shard in value.addressable_shards:
            full[shard.index] = np.asarray(shard.data)
        held["/".join(map(str, path))] = full
    return held


def load(path: str, shard_weights: bool, gap: int, quantization: str = "none") -> tuple[ltx_jax.LTXModel, int]:
    """The model and the bytes its loading read from the safetensors file, runs `gap` apart read as one."""
    safetensors_file.COALESCE_GAP_BYTES = gap
    bytes_read[0] = 0
    model, _ = ltx_jax.load_checkpoint(
        path, mesh=make_mesh(8), dtype=jnp.float32, shard_weights=shard_weights, quantization=quantization
    )
    return model, bytes_read[0]


# Gap 0: every run read on its own, so the count is exactly the shards' bytes. The tiny model's rows are
# a few hundred bytes, so the default (a page) would read its column-split tensors whole; LTX-2's rows
# are 8 KiB or more, where a process's half of a row is a page or more and the default reads it alone.
sharded, sharded_bytes = load(src, shard_weights=True, gap=0)
replicated, replicated_bytes = load(src, shard_weights=False, gap=safetensors_file.COALESCE_GAP_BYTES)
restored, _ = load(converted, shard_weights=True, gap=0)
loads = {"sharded": sharded, "replicated": replicated, "orbax": restored}
for name, path, shard_weights in (("fp8", src, True), ("fp8 replicated", src, False), ("fp8 file", fp8_src, True)):
    loads[name], _ = load(path, shard_weights=shard_weights, gap=0, quantization="fp8")
arrays = {}
for name, model in loads.items():
    arrays.update({f"{name}:{path}": held for path, held in holdings(model).items()})
np.savez(os.path.join(out_dir, f"process{process_id}.npz"), **arrays)
with open(os.path.join(out_dir, f"process{process_id}.json"), "w") as f:
    json.dump({"sharded": sharded_bytes, "replicated": replicated_bytes}, f)
