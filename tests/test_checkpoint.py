"""Official-format safetensors -> Orbax conversion and loading (direct and converted, on a mesh)."""

import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from checkpoint_files import fp8_scaled, metadata_config, official_state, write_checkpoint
from flax import nnx
from ltx_core.loader.fuse_loras import apply_loras
from ltx_core.loader.primitives import LoraStateDictWithStrength, StateDict
from ltx_core_twin import default_inputs, relative_error, run_jax, torch_model
from orbax.checkpoint import v1 as ocp
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tolerances import SP

import ltx_jax
from ltx_jax.convert import orbax_parts
from ltx_jax.convert.dit_tensors import Lora
from ltx_jax.convert.lora import load_lora
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys
from ltx_jax.model.lora import combined, fused_kernel, with_lora
from ltx_jax.parallel import SequenceParallel, make_mesh

# Heads divisible by 8 so the same model also runs on an 8-device mesh.
CFG = ltx_jax.LTXConfig.tiny(
    av_ca_scale_shift_from_sigma=True,
    apply_gated_attention=True,
    cross_attention_adaln=True,
    num_attention_heads=8,
    attention_head_dim=8,
    audio_num_attention_heads=8,
    audio_attention_head_dim=4,
)
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "convert_checkpoint.py")


@pytest.fixture(scope="module")
def reference():
    return torch_model(CFG)


def expected_outputs(state: dict, dtype) -> tuple:
    """The model loaded with `load_state_dict` straight from the torch tensors."""
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), param_dtype=dtype), state)
    return run_jax(model, *default_inputs(CFG), dtype=dtype)


def assert_identical(model: ltx_jax.LTXModel, expected: tuple, dtype) -> None:
    for ours, theirs in zip(run_jax(model, *default_inputs(CFG), dtype=dtype), expected, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize(("file_dtype", "dtype"), [(torch.float32, jnp.float32), (torch.bfloat16, jnp.bfloat16)])
def test_convert_and_load_bit_exact(tmp_path, reference, file_dtype, dtype):
    src = tmp_path / "ltx.safetensors"
    state = {k: v.to(file_dtype) for k, v in reference.state_dict().items()}
    write_checkpoint(src, CFG, official_state(state, file_dtype))
    summary = ltx_jax.convert_checkpoint(src, tmp_path / "converted", dtype=jnp.dtype(dtype).name, progress=False)
    assert summary.skipped == {"video VAE": 1, "audio VAE": 1, "text connectors": 1}
    expected = expected_outputs(state, dtype)
    for path in (tmp_path / "converted", src):  # converted Orbax, and the safetensors file directly
        model, cfg = ltx_jax.load_checkpoint(path, dtype=dtype, attention_backend="xla")
        assert cfg == CFG
        assert_identical(model, expected, dtype)


def test_a_conversion_in_many_parts_and_one_of_format_1_load_bit_exact(tmp_path, reference, monkeypatch):
    """Parts of a few tensors each (PART_BYTES lowered) restore to the same model; so does a format-1
    directory (the parameters in one Orbax checkpoint, written here by partial saves as before parts)."""
    src = tmp_path / "ltx.safetensors"
    state = reference.state_dict()
    write_checkpoint(src, CFG, official_state(state, torch.float32))
    monkeypatch.setattr(orbax_parts, "PART_BYTES", 4096)
    ltx_jax.convert_checkpoint(src, tmp_path / "parts", dtype="float32", progress=False)
    manifest = json.loads((tmp_path / "parts" / "ltx_jax_checkpoint.json").read_text())
    assert len(manifest["parts"]) == len(os.listdir(tmp_path / "parts" / "params")) > 10
    expected = expected_outputs(state, jnp.float32)
    assert_identical(
        ltx_jax.load_checkpoint(tmp_path / "parts", dtype=jnp.float32, attention_backend="xla")[0],
        expected,
        jnp.float32,
    )

    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), param_dtype=jnp.float32)
    params = {
        path: np.asarray(v.get_value())
        for path, v in nnx.to_flat_state(nnx.state(ltx_jax.load_state_dict(model, state), nnx.Param))
    }
    old = tmp_path / "format1"
    for half in (dict(list(params.items())[::2]), dict(list(params.items())[1::2])):
        ocp.partial.save(old / "params", orbax_parts.nest(half))
    ocp.partial.finalize(old / "params")
    (old / "ltx_jax_checkpoint.json").write_text(
        json.dumps({k: v for k, v in manifest.items() if k != "parts"} | {"format": 1})
    )
    assert_identical(ltx_jax.load_checkpoint(old, dtype=jnp.float32, attention_backend="xla")[0], expected, jnp.float32)


def test_fp8_scaled_weights_dequantize(tmp_path, reference):
    stored, dequantized = fp8_scaled(reference.state_dict())
    src = tmp_path / "fp8.safetensors"
    write_checkpoint(src, CFG, {DIT_PREFIX + k: v for k, v in stored.items()})
    model, _ = ltx_jax.load_checkpoint(src, dtype=jnp.float32, attention_backend="xla")
    assert_identical(model, expected_outputs(dequantized, jnp.float32), jnp.float32)


@pytest.mark.parametrize("strengths", [(0.7,), (0.7, -0.4)])
def test_lora_fusion_matches_ltx_core(tmp_path, reference, strengths):
    """One LoRA, and two stacked (`--lora A 0.7 --lora B -0.4`, overlapping targets), fused as ltx-core's
    `apply_loras` fuses them: the same bf16 weights, so every flow computes the same latents."""
    base = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    targets = ["transformer_blocks.0.attn1.to_q.weight", "transformer_blocks.1.ff.net.2.weight", "patchify_proj.weight"]
    loras, ours = [], []
    for i, strength in enumerate(strengths):
        path = tmp_path / f"lora{i}.safetensors"
        write_lora(path, base, targets[i:], seed=i)
        ours.append(Lora(str(path), strength))
        torch_lora = {k.removeprefix("diffusion_model."): v for k, v in load_file(str(path)).items()}
        loras.append(LoraStateDictWithStrength(StateDict(torch_lora, "cpu", 0, set()), strength))
    src = tmp_path / "base.safetensors"
    write_checkpoint(src, CFG, official_state(base, torch.bfloat16))
    ltx_jax.convert_checkpoint(src, tmp_path / "fused", dtype="bfloat16", loras=ours, progress=False)
    fused = apply_loras(StateDict(base, "cpu", 0, {torch.bfloat16}), loras)
    model, _ = ltx_jax.load_checkpoint(tmp_path / "fused", dtype=jnp.bfloat16, attention_backend="xla")
    for key in targets:
        assert not torch.equal(fused.sd[key], base[key])
    assert_identical(model, expected_outputs(fused.sd, jnp.bfloat16), jnp.bfloat16)


def write_lora(path, base: dict, targets: list[str], rank: int = 4, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    lora = {}
    for key in targets:
        out_features, in_features = base[key].shape
        module = f"diffusion_model.{key.removesuffix('.weight')}"
        lora[f"{module}.lora_A.weight"] = torch.randn(rank, in_features, generator=generator).bfloat16()
        lora[f"{module}.lora_B.weight"] = torch.randn(out_features, rank, generator=generator).bfloat16()
    save_file(lora, str(path))


def test_lora_loads_its_factors_exactly_and_refuses_a_misfit_from_the_header(tmp_path, reference, capfd, monkeypatch):
    """The factors on the devices are the file's, bit for bit, with a progress bar; a factor of the wrong
    shape fails naming the module before any tensor is read."""
    base = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    targets = ["transformer_blocks.0.attn1.to_q.weight", "transformer_blocks.1.ff.net.2.weight"]
    lora = Lora(str(tmp_path / "lora.safetensors"), 1.0)
    write_lora(lora.path, base, targets)
    model = nnx.eval_shape(lambda: ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0)))
    factors = load_lora(model, lora).factors
    stored, table = load_file(lora.path), expected_keys(model)
    for key in targets:
        module = f"diffusion_model.{key.removesuffix('.weight')}"
        ours = factors[table[key][0]]
        for factor, part in zip(ours, "AB", strict=True):
            assert np.array_equal(
                np.asarray(factor, np.float32), stored[f"{module}.lora_{part}.weight"].float().numpy()
            )
    assert "loading lora.safetensors: 100%" in capfd.readouterr().err
    stored["diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight"] = torch.zeros(4, 3, dtype=torch.bfloat16)
    save_file(stored, str(tmp_path / "wrong.safetensors"))
    monkeypatch.setattr(
        SafetensorsFile, "read", lambda *_: pytest.fail("a tensor was read before the shapes were checked")
    )
    wrong = r"does not fit this DiT: transformer_blocks\.0\.attn1\.to_q\.weight: A \(4, 3\)"
    with pytest.raises(ValueError, match=wrong):
        load_lora(model, Lora(str(tmp_path / "wrong.safetensors"), 1.0))


# replicated weights with a LoRA in the forward: test_two_loras_applied_in_the_forward_equal_both_fused
@pytest.mark.parametrize("shard_weights", [True])
def test_lora_applied_in_the_forward_equals_fused(tmp_path, reference, shard_weights):
    """`with_lora` (block LoRAs added as each block runs, an outer one fused up front) under SequenceParallel on
    8 devices, the base weights replicated or FSDP-sharded, equals the model with the LoRA fused at load time
    (float32), shares the base model's arrays and leaves them as they were; in bf16 its fused weights are
    ltx-core's `apply_loras` weights bit for bit."""
    base = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    targets = ["transformer_blocks.0.attn1.to_q.weight", "transformer_blocks.1.ff.net.2.weight", "patchify_proj.weight"]
    lora = Lora(str(tmp_path / "lora.safetensors"), 0.7)
    write_lora(lora.path, base, targets)
    src = tmp_path / "base.safetensors"
    write_checkpoint(src, CFG, official_state({k: v.float() for k, v in base.items()}, torch.float32))
    mesh = make_mesh(8)
    load = dict(mesh=mesh, dtype=jnp.float32, shard_weights=shard_weights, progress=False)
    model, _ = ltx_jax.load_checkpoint(src, **load)
    fused, _ = ltx_jax.load_checkpoint(src, loras=[lora], **load)
    before = np.asarray(model.patchify_proj.kernel.get_value())
    stage_2 = with_lora(model, load_lora(model, lora, mesh=mesh))
    video, audio = (m.to_jax() for m in default_inputs(CFG, video_tokens=50))
    expected = SequenceParallel(fused, mesh)(video, audio)
    without = SequenceParallel(model, mesh)(video, audio)
    for ours, theirs, plain in zip(SequenceParallel(stage_2, mesh)(video, audio), expected, without, strict=True):
        assert relative_error(ours, np.asarray(theirs)) <= SP
        assert relative_error(plain, np.asarray(theirs)) > 100 * SP  # the LoRA changes the output
    np.testing.assert_array_equal(np.asarray(model.patchify_proj.kernel.get_value()), before)
    shared = stage_2.transformer_blocks[0].block.attn1.to_q.kernel.get_value()
    assert shared is model.transformer_blocks[0].attn1.to_q.kernel.get_value()  # one copy of the base weights

    with safe_open(lora.path, framework="pt") as f:
        torch_lora = StateDict({k.removeprefix("diffusion_model."): f.get_tensor(k) for k in f.keys()}, "cpu", 0, set())
    reference_fused = apply_loras(
        StateDict(base, "cpu", 0, {torch.bfloat16}), [LoraStateDictWithStrength(torch_lora, 0.7)]
    )
    for key in targets:
        module = key.removesuffix(".weight")
        a, b = (
            jnp.asarray(torch_lora.sd[f"{module}.lora_{p}.weight"].float().numpy()).astype(jnp.bfloat16) for p in "AB"
        )
        kernel = jnp.asarray(base[key].float().numpy().T).astype(jnp.bfloat16)
        ours = np.asarray(fused_kernel(kernel, a, b, 0.7).astype(jnp.float32)).T
        np.testing.assert_array_equal(ours, reference_fused.sd[key].float().numpy())


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300)


def test_script_converts_with_summary(tmp_path, reference):
    src = tmp_path / "ltx.safetensors"
    write_checkpoint(src, CFG, official_state(reference.state_dict(), torch.float32))
    result = run_script(str(src), str(tmp_path / "out"), "--dtype", "float32")
    assert result.returncode == 0, result.stderr
    table_size = len(expected_keys(ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0))))
    assert f"converted {table_size} tensors" in result.stdout
    assert "video VAE (1 tensors)" in result.stdout
    assert "converting ltx.safetensors: 100%" in result.stderr


def test_config_override_for_a_file_without_metadata(tmp_path, reference):
    src = tmp_path / "bare.safetensors"
    write_checkpoint(src, CFG, official_state(reference.state_dict(), torch.float32), with_config=False)
    failed = run_script(str(src), str(tmp_path / "out"))
    assert failed.returncode == 2  # a usage error
    assert "has no 'config' in its safetensors metadata" in failed.stderr
    assert "--config FILE" in failed.stderr
    assert not (tmp_path / "out").exists()
    (tmp_path / "config.json").write_text(json.dumps(metadata_config(CFG)))
    ok = run_script(str(src), str(tmp_path / "out"), "--config", str(tmp_path / "config.json"))
    assert ok.returncode == 0, ok.stderr


def bad_files(tmp_path, reference) -> dict:
    state = official_state(reference.state_dict(), torch.float32)
    good = tmp_path / "good.safetensors"
    write_checkpoint(good, CFG, state)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    missing = tmp_path / "missing.safetensors"
    write_checkpoint(
        missing, CFG, {k: v for k, v in state.items() if not k.endswith("transformer_blocks.0.attn1.k_norm.weight")}
    )
    shape = tmp_path / "shape.safetensors"
    write_checkpoint(shape, CFG, {**state, "model.diffusion_model.proj_out.weight": torch.zeros(3, 3)})
    unknown = tmp_path / "unknown.safetensors"
    write_checkpoint(unknown, CFG, {**state, "model.diffusion_model.mystery.weight": torch.zeros(2)})
    dtype = tmp_path / "dtype.safetensors"
    raw = good.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header = raw[8 : 8 + header_len].replace(b'"F32"', b'"F4X"', 1)
    dtype.write_bytes(raw[:8] + header + raw[8 + header_len :])
    return {
        truncated: r"truncated",
        missing: r"1 missing keys: transformer_blocks\.0\.attn1\.k_norm\.weight",
        shape: r"wrong shapes: model\.diffusion_model\.proj_out\.weight: checkpoint \(3, 3\)",
        unknown: r"unexpected keys: model\.diffusion_model\.mystery\.weight",
        dtype: r"has dtype 'F4X', which ltx-jax cannot read",
    }


def test_bad_files_fail_clearly_and_leave_nothing(tmp_path, reference):
    for src, message in bad_files(tmp_path, reference).items():
        out = tmp_path / f"out-{src.stem}"
        with pytest.raises(ValueError, match=message):
            ltx_jax.convert_checkpoint(src, out, progress=False)
        with pytest.raises(ValueError, match=message):
            ltx_jax.load_checkpoint(src)
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_unknown_dtype_and_existing_output(tmp_path, reference):
    src = tmp_path / "ltx.safetensors"
    write_checkpoint(src, CFG, official_state(reference.state_dict(), torch.float32))
    with pytest.raises(ValueError, match=r"dtype must be one of \['bfloat16', 'float16', 'float32'\], got 'int8'"):
        ltx_jax.convert_checkpoint(src, tmp_path / "out", dtype="int8")
    (tmp_path / "exists").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        ltx_jax.convert_checkpoint(src, tmp_path / "exists")


def test_interrupted_conversion_leaves_nothing(tmp_path, reference, monkeypatch):
    """Interrupted while writing its third part: the two written and the temporary directory are removed."""
    src = tmp_path / "ltx.safetensors"
    write_checkpoint(src, CFG, official_state(reference.state_dict(), torch.float32))
    monkeypatch.setattr(orbax_parts, "PART_BYTES", 4096)
    save, calls = orbax_parts.ocp.save, []

    def interrupt_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return save(*args, **kwargs)

    monkeypatch.setattr("ltx_jax.convert.orbax_parts.ocp.save", interrupt_the_third)
    with pytest.raises(KeyboardInterrupt):
        ltx_jax.convert_checkpoint(src, tmp_path / "out", progress=False)
    assert len(calls) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ltx.safetensors"]


def test_a_converted_directory_that_does_not_match_fails_before_reading(tmp_path, reference, monkeypatch):
    src = tmp_path / "ltx.safetensors"
    write_checkpoint(src, CFG, official_state(reference.state_dict(), torch.float32))
    monkeypatch.setattr(orbax_parts, "PART_BYTES", 4096)
    out = tmp_path / "out"
    ltx_jax.convert_checkpoint(src, out, dtype="float32", progress=False)
    manifest_file = out / "ltx_jax_checkpoint.json"
    manifest = json.loads(manifest_file.read_text())
    first, *rest = manifest["parts"]
    damaged = {
        r"no part holds 1 parameters: " + first[0]: [first[1:], *rest],
        r"the model has no 1 parameters: mystery/kernel": [[*first, "mystery/kernel"], *rest],
        r"more than one part lists 1 parameters: " + first[0]: [first, [first[0], *rest[0]], *rest[1:]],
    }
    for message, parts in damaged.items():
        manifest_file.write_text(json.dumps({**manifest, "parts": parts}))
        with pytest.raises(ValueError, match=message + r".*convert the \.safetensors file again"):
            ltx_jax.load_checkpoint(out)
    manifest_file.write_text(json.dumps({k: v for k, v in manifest.items() if k != "parts"}))
    with pytest.raises(ValueError, match=r"'parts' must list each part's parameter keys .* got NoneType"):
        ltx_jax.load_checkpoint(out)
    manifest_file.write_text(json.dumps({**manifest, "format": 3}))
    with pytest.raises(ValueError, match="checkpoint format 3; this ltx-jax reads formats 1, 2. A newer format needs"):
        ltx_jax.load_checkpoint(out)


def test_two_loras_applied_in_the_forward_equal_both_fused(tmp_path, reference):
    """ic-lora's stage 1 with two `--lora` files (`combined`: one update of stacked ranks, each B scaled by its
    strength) equals the model with both fused at load time, in float32 on 8 devices."""
    base = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    targets = ["transformer_blocks.0.attn1.to_q.weight", "transformer_blocks.1.ff.net.2.weight"]
    loras = [Lora(str(tmp_path / f"lora{i}.safetensors"), strength) for i, strength in enumerate((0.7, -0.4))]
    for i, lora in enumerate(loras):
        write_lora(lora.path, base, targets[i:], seed=i)  # overlapping: the second LoRA targets one of them
    src = tmp_path / "base.safetensors"
    write_checkpoint(src, CFG, official_state({k: v.float() for k, v in base.items()}, torch.float32))
    mesh = make_mesh(8)
    model, _ = ltx_jax.load_checkpoint(src, mesh=mesh, dtype=jnp.float32, progress=False)
    fused, _ = ltx_jax.load_checkpoint(src, mesh=mesh, dtype=jnp.float32, loras=loras, progress=False)
    stage_1 = with_lora(model, combined([load_lora(model, lora, mesh=mesh) for lora in loras]))
    video, audio = (m.to_jax() for m in default_inputs(CFG, video_tokens=50))
    only_first = with_lora(model, load_lora(model, loras[0], mesh=mesh))
    expected = SequenceParallel(fused, mesh)(video, audio)
    first = SequenceParallel(only_first, mesh)(video, audio)
    for ours, theirs in zip(SequenceParallel(stage_1, mesh)(video, audio), expected, strict=True):
        assert relative_error(ours, np.asarray(theirs)) <= SP
    # the second LoRA matters (its one target, the last block's video FF, reaches the video output only)
    assert relative_error(first[0], np.asarray(expected[0])) > 100 * SP
