"""Checkpoint loading on a multi-process mesh: each process reads only the boxes of the tensors its
devices hold (2 real processes x 4 CPU devices), and box reads equal slices of whole reads."""

import itertools
import json
import math
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from checkpoint_files import fp8_scaled, official_state, write_checkpoint
from flax import nnx
from ltx_core_twin import torch_model
from multiprocess_case import CFG, HERE, free_port, run_processes
from safetensors.numpy import save_file
from safetensors.torch import save_file as save_torch_file

import ltx_jax
from ltx_jax.convert import orbax_parts, safetensors_file
from ltx_jax.convert.dit_tensors import DitTensors, Lora
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys
from ltx_jax.parallel.sharding import fsdp_spec

PROCESSES = 2
MESH = 8
WORKER = os.path.join(HERE, "multiprocess_loading_worker.py")


@pytest.fixture
def count_bytes(monkeypatch):
    """A list whose only item counts the bytes every SafetensorsFile read asks for."""
    total, read_range = [0], safetensors_file._read_range

    def counting(f, offset, out):
        total[0] += len(out)
        read_range(f, offset, out)

    monkeypatch.setattr(safetensors_file, "_read_range", counting)
    return total


@pytest.mark.parametrize("gap", [0, 40, safetensors_file.COALESCE_GAP_BYTES])
def test_box_reads_equal_slices(tmp_path, monkeypatch, count_bytes, gap):
    """Every kind of box (leading axis, inner axis, several partial axes, one element, a 0-d tensor)
    equals the numpy slice; with gap 0 exactly the box's bytes are read."""
    monkeypatch.setattr(safetensors_file, "COALESCE_GAP_BYTES", gap)
    rng = np.random.default_rng(0)
    arrays = {
        "cube": rng.standard_normal((7, 5, 6)).astype(np.float32),
        "matrix": rng.standard_normal((16, 300)).astype(np.float16),
        "vector": np.arange(10, dtype=np.int16),
        "scalar": np.array(3.0, np.float32),
    }
    save_file(arrays, str(tmp_path / "t.safetensors"))
    file = SafetensorsFile(tmp_path / "t.safetensors")
    for key, array in arrays.items():
        ranges = [[(0, n), (1, n), (0, n - 1), (n // 2, n // 2 + 1)] for n in array.shape]
        for bounds in itertools.product(*ranges):
            box = tuple(slice(*b) for b in bounds)
            count_bytes[0] = 0
            np.testing.assert_array_equal(file.read(key, box), array[box])
            if gap == 0:
                assert count_bytes[0] == array[box].nbytes, (key, box)
            else:
                assert array[box].nbytes <= count_bytes[0] <= array.nbytes, (key, box)


def test_box_reads_of_fp8_and_lora_weights_equal_slices_of_whole_reads(tmp_path):
    """Dequantization and LoRA fusion of a box equal the box of the whole tensor's, bit for bit."""
    stored, _ = fp8_scaled(torch_model(CFG).state_dict())
    write_checkpoint(tmp_path / "fp8.safetensors", CFG, {DIT_PREFIX + k: v for k, v in stored.items()})
    key = "transformer_blocks.0.ff.net.2.weight"
    out_features, in_features = stored[key].shape
    generator = torch.Generator().manual_seed(1)
    lora = {
        f"diffusion_model.{key[: -len('.weight')]}.lora_A.weight": torch.randn(4, in_features, generator=generator),
        f"diffusion_model.{key[: -len('.weight')]}.lora_B.weight": torch.randn(out_features, 4, generator=generator),
    }
    save_torch_file({k: v.bfloat16() for k, v in lora.items()}, str(tmp_path / "lora.safetensors"))
    tensors = DitTensors(
        SafetensorsFile(tmp_path / "fp8.safetensors"), jnp.bfloat16, (Lora(str(tmp_path / "lora.safetensors"), 0.7),)
    )
    whole = tensors.read(key)
    assert not np.array_equal(whole, DitTensors(tensors.st, jnp.bfloat16).read(key))  # the LoRA is fused
    for box in [(slice(0, out_features // 2),), (slice(None), slice(in_features // 4, in_features // 2))]:
        np.testing.assert_array_equal(tensors.read(key, box), whole[box])


def is_split(shape: tuple[int, ...]) -> bool:
    return any(name is not None for name in fsdp_spec(shape, MESH))


def process_share(shape: tuple[int, ...], itemsize: int) -> int:
    """The bytes of a JAX-layout parameter one process holds when the FSDP split spans both processes."""
    nbytes = math.prod(shape) * itemsize
    return nbytes // PROCESSES if is_split(shape) else nbytes


def test_two_processes_read_only_their_shards(tmp_path, monkeypatch):
    src = tmp_path / "ltx.safetensors"
    write_checkpoint(src, CFG, official_state(torch_model(CFG).state_dict(), torch.float32))
    monkeypatch.setattr(orbax_parts, "PART_BYTES", 16384)  # many parts, restored by both processes in turn
    ltx_jax.convert_checkpoint(src, tmp_path / "converted", dtype="float32", progress=False)
    assert len(os.listdir(tmp_path / "converted" / "params")) > 10
    port = free_port()
    command = [sys.executable, WORKER, str(port)]
    fp8_src = tmp_path / "fp8.safetensors"
    fp8_state, _ = fp8_scaled(torch_model(CFG).state_dict())
    write_checkpoint(fp8_src, CFG, {DIT_PREFIX + k: v for k, v in fp8_state.items()})
    arguments = [str(src), str(tmp_path / "converted"), str(tmp_path), str(fp8_src)]
    run_processes([[*command, str(i), *arguments] for i in range(PROCESSES)])

    def single_process(path, quantization: str) -> dict[str, np.ndarray]:
        model, _ = ltx_jax.load_checkpoint(path, dtype=jnp.float32, quantization=quantization)
        return {
            "/".join(map(str, p)): np.asarray(v.get_value(), np.float32) for p, v in nnx.to_flat_state(nnx.state(model))
        }

    expected, expected_fp8, expected_fp8_file = (
        single_process(src, "none"), single_process(src, "fp8"), single_process(fp8_src, "fp8")
    )  # fmt: skip
    shapes = [shape for _, _, shape, _ in expected_keys(ltx_jax.LTXModel.abstract(CFG, np.dtype(np.float32))).values()]
    total = sum(math.prod(shape) * 4 for shape in shapes)
    share = sum(process_share(shape, 4) for shape in shapes)  # transposition keeps the byte count
    assert share < 0.6 * total  # the tiny model is mostly splittable, so the test has something to prove
    held = [np.load(tmp_path / f"process{i}.npz") for i in range(PROCESSES)]
    for i in range(PROCESSES):
        with open(tmp_path / f"process{i}.json") as f:
            counts = json.load(f)
        assert counts["sharded"] == share, f"process {i} read {counts['sharded']} bytes, its shards are {share}"
        assert counts["replicated"] == total, f"process {i}: each tensor once, not once per device"
    loads = [(load, name, value) for load in ("sharded", "orbax", "replicated") for name, value in expected.items()]
    for load, values in (("fp8", expected_fp8), ("fp8 replicated", expected_fp8), ("fp8 file", expected_fp8_file)):
        loads += [(load, name, value) for name, value in values.items()]  # the same scales and fp8 values
    assert any(value.ndim == 0 for _, name, value in loads if name.endswith("kernel_scale"))
    for load, name, value in loads:
        parts = [h[f"{load}:{name}"] for h in held]
        for part in parts:  # what a process holds equals the single-process load there
            mask = ~np.isnan(part)
            np.testing.assert_array_equal(part[mask], value[mask], err_msg=f"{load}:{name}")
        assert np.all(np.any([~np.isnan(p) for p in parts], axis=0)), f"{load}:{name}: not every element held"
        if "replicated" not in load and is_split(value.shape):
            assert all(np.isnan(p).any() for p in parts), f"{load}:{name} is not split between the processes"


def test_convert_script_refuses_to_run_as_several_tasks(tmp_path):
    script = os.path.join(HERE, os.pardir, "scripts", "convert_checkpoint.py")
    env = dict(os.environ, SLURM_NTASKS="2")
    result = subprocess.run(
        [sys.executable, script, str(tmp_path / "missing.safetensors"), str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "launched as 2 tasks" in result.stderr
    assert not (tmp_path / "out").exists()
