"""Peak memory and throughput of checkpoint conversion on a synthetic multi-GB safetensors file.

    python benchmarks/bench_convert.py --layers 2 --workdir /tmp/bench_convert

Writes an official-format checkpoint (LTX-2.3 width, `--layers` blocks, bf16 tensors under
`model.diffusion_model.`, config in the metadata) tensor by tensor, converts it in a child process
with scripts/convert_checkpoint.py, and reports the child's peak RSS against the bound
1.5 x largest tensor + 1 GB, and the throughput.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np
from flax import nnx

import ltx_jax
from ltx_jax.convert.safetensors_file import DTYPES
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys

CONVERT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "scripts", "convert_checkpoint.py")
GB = 1e9


def write_synthetic(path: str, cfg: ltx_jax.LTXConfig) -> tuple[int, int]:
    """Streams a bf16 checkpoint of `cfg` to `path`; returns (file bytes, largest tensor bytes)."""
    table = expected_keys(ltx_jax.LTXModel.abstract(cfg, np.float32))
    bf16 = DTYPES["BF16"]
    header, offset = {}, 0
    for key, (_, _, shape, _) in table.items():
        nbytes = int(np.prod(shape)) * bf16.itemsize
        header[DIT_PREFIX + key] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {"config": json.dumps(cfg.to_metadata()), "model_version": "2.3.0"}
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded)
        for _, _, shape, _ in table.values():
            f.write((rng.standard_normal(shape, np.float32) * 0.02).astype(bf16).tobytes())
    largest = max(int(np.prod(shape)) for _, _, shape, _ in table.values()) * bf16.itemsize
    return offset, largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks at LTX-2.3 width (default 2)")
    parser.add_argument("--workdir", default="/tmp/bench_convert", help="where the files go (removed at the end)")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    src, out = os.path.join(args.workdir, "synthetic.safetensors"), os.path.join(args.workdir, "converted")
    shutil.rmtree(out, ignore_errors=True)
    cfg = ltx_jax.LTXConfig.ltx2_3(num_layers=args.layers)
    try:
        start = time.perf_counter()
        size, largest = write_synthetic(src, cfg)
        seconds = time.perf_counter() - start
        print(
            f"wrote {size / GB:.2f} GB ({args.layers} blocks at LTX-2.3 width, bf16) in {seconds:.0f} s; "
            f"largest tensor {largest / 1e6:.0f} MB"
        )
        command = [sys.executable, CONVERT, src, out, "--dtype", "bfloat16"]
        start = time.perf_counter()
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
        bound = 1.5 * largest + 1 * GB
        print(f"converted in {seconds:.1f} s: {size / 1e6 / seconds:.0f} MB/s (process start and imports included)")
        print(
            f"peak RSS {peak / GB:.2f} GB; bound 1.5 x largest + 1 GB = {bound / GB:.2f} GB: "
            f"{'within' if peak < bound else 'OVER'}"
        )
        model, _ = ltx_jax.load_checkpoint(out)
        params = sum(v.get_value().size for _, v in nnx.to_flat_state(nnx.state(model, nnx.Param)))
        print(f"loaded back: {params / 1e9:.2f}B parameters")
    finally:
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
