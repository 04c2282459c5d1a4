"""scripts/make_synthetic_checkpoint.py: its planned tensors against ltx-core's builders and loader renaming at
real width (nothing written: 2 real-width DiT layers alone are 2.4 GB), and its --tiny files loaded by
ltx-pipelines' ModelLedger and transformers, and run by scripts/generate.py on 8 simulated CPU devices at full depth
(the two-stage flow's compile-ahead on files: tests/test_synthetic_ltx25.py's quick start)."""

import dataclasses
import json
import pathlib
import subprocess
import sys
from unittest import mock

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from safetensors import safe_open
from tolerances import SYNTHETIC_STD
from torchaudio_stand_in import torchaudio_stand_in
from transformers import AutoImageProcessor, Gemma3ForConditionalGeneration

import ltx_jax
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys, mismatch_problems
from ltx_jax.pipeline import CheckpointFiles
from ltx_jax.pipeline.prompts import TextEncoder
from ltx_jax.text_encoders.gemma.encoders import abstract_gemma, gemma_text_state_dict
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import Gemma3ModelConfig
from ltx_jax.text_encoders.gemma.tokenizer import LTXGemmaTokenizer

with torchaudio_stand_in():
    from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP
    from ltx_core.loader.primitives import LoraPathStrengthAndSDOps
    from ltx_core.text_encoders.gemma.encoders import encoder_configurator
    from ltx_core.text_encoders.gemma.tokenizer import LTXVGemmaTokenizer
    from ltx_pipelines.utils.model_ledger import ModelLedger


sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "scripts"))
import make_synthetic_checkpoint as synthetic  # noqa: E402
import synthetic_files  # noqa: E402
import synthetic_gemma  # noqa: E402

LAYERS = 2
PROMPT = "A red fox trots through fresh snow, ünïcode"
CONNECTORS = ("video_embeddings_connector.", "audio_embeddings_connector.")


def loaded_shapes(sd_ops, planned: dict) -> dict[str, tuple[int, ...]]:
    """Model key -> shape of what ltx-core's loader makes of the planned file keys through `sd_ops`."""
    return {
        key: tensor.shape for file_key, tensor in planned.items() for key in synthetic.loaded_keys(sd_ops, file_key)
    }


@pytest.fixture(scope="module")
def real_width() -> tuple[dict, dict]:
    """The metadata config (as JSON gives it back) and the planned tensors of the 2-layer real-width checkpoint,
    its text projection sized for the 48-layer Gemma (the 12B that ltx-core 1.0.0 builds)."""
    config = json.loads(json.dumps(synthetic.checkpoint_config(LAYERS)))
    return config, synthetic.plan_checkpoint(config, synthetic_gemma.gemma_config())


def test_checkpoint_plan_is_what_ltx_core_builds_at_real_width(real_width):
    """Each model, built by ltx-core's configurator from the metadata as written, gets every key in its shape
    through its ModelLedger renaming; the DiT's filter also lets the connectors through (ltx-core ignores them)."""
    config, planned = real_width
    selected = set()
    for name, component in synthetic.checkpoint_components().items():
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in component.configurator.from_config(config).state_dict().items()}
        loaded = loaded_shapes(component.sd_ops, planned)
        assert {k: loaded.get(k) for k in expected} == expected, name
        extra = set(loaded) - set(expected)
        assert all(k.startswith(CONNECTORS) for k in extra) if name == "transformer" else not extra, name
        selected |= {k for k in planned if synthetic.loaded_keys(component.sd_ops, k)}
    assert selected == set(planned)
    assert {t.dtype for t in planned.values()} == {"BF16"}
    assert planned["text_embedding_projection.video_aggregate_embed.weight"].shape == (4096, 3840 * 49)
    assert sum(k.startswith(f"{DIT_PREFIX}transformer_blocks.{LAYERS - 1}.") for k in planned) > 0
    assert not any(k.startswith(f"{DIT_PREFIX}transformer_blocks.{LAYERS}.") for k in planned)


def test_dit_plan_loads_in_ltx_jax_at_real_width(real_width):
    """ltx-jax reads the written config and expects exactly the planned DiT keys and shapes."""
    config, planned = real_width
    cfg = ltx_jax.LTXConfig.from_metadata(config)
    assert (cfg.num_layers, cfg.apply_gated_attention, cfg.cross_attention_adaln) == (LAYERS, True, True)
    table = expected_keys(nnx.eval_shape(lambda: ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0))))
    dit = {k[len(DIT_PREFIX) :]: v for k, v in planned.items() if k.startswith(DIT_PREFIX)}
    names = {k: k for k in dit if not k.startswith(CONNECTORS)}
    assert mismatch_problems(table, dit, names) == []


def test_lora_plan_fits_the_dit_in_ltx_core(real_width):
    """Through ltx-core's LoRA renaming, each pair names a DiT weight: A (rank, in), B (out, rank)."""
    planned = real_width[1]
    weights = loaded_shapes(synthetic.checkpoint_components()["transformer"].sd_ops, planned)
    lora = loaded_shapes(LTXV_LORA_COMFY_RENAMING_MAP, synthetic.plan_lora(planned, synthetic.LORA_RANK))
    for key, shape in lora.items():
        module, part, _ = key.rsplit(".", 2)
        out_features, in_features = weights[f"{module}.weight"]
        assert shape == (
            (synthetic.LORA_RANK, in_features) if part == "lora_A" else (out_features, synthetic.LORA_RANK)
        )
    # 6 attentions x (q, k, v, out) + 2 feed-forwards x 2 Linears, an A and a B each, in every block
    assert len(lora) == LAYERS * 2 * (6 * 4 + 2 * 2)


def test_gemma_plan_is_the_12b_ltx_jax_loads():
    """The full 48-layer directory plan has the keys and shapes ltx-jax's Gemma 3 loader expects (it ignores
    the vision tower and the projector), and the official names (no tied lm_head)."""
    config = synthetic_gemma.gemma_config()
    planned = synthetic_gemma.plan_gemma(config)
    text = gemma_text_state_dict(planned)
    table = expected_keys(abstract_gemma(Gemma3ModelConfig.from_hf_dict(config), jnp.bfloat16))
    assert mismatch_problems(table, text, {k: k for k in text}) == []
    assert planned["language_model.model.embed_tokens.weight"].shape == (262208, 3840)
    prefixes = {".".join(k.split(".")[:2]) for k in planned}
    projector = {"multi_modal_projector.mm_input_projection_weight", "multi_modal_projector.mm_soft_emb_norm"}
    assert prefixes == {"language_model.model", "vision_tower.vision_model", *projector}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("synthetic")
    return synthetic.make_synthetic_checkpoint(out, layers=LAYERS, gemma_layers=LAYERS, tiny=True, workers=2)


def test_manifest_names_the_written_files(tiny):
    root = pathlib.Path(tiny["checkpoint"]).parent
    assert json.loads((root / "manifest.json").read_text()) == tiny
    assert set(tiny) == {"checkpoint", "spatial_upsampler", "distilled_lora", "gemma_root"}
    assert all(pathlib.Path(path).exists() for path in tiny.values())
    assert not list(root.rglob("*.partial"))
    gemma = pathlib.Path(tiny["gemma_root"])
    index = json.loads((gemma / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    assert all((gemma / name).is_file() for name in shards)
    total = 0
    for name in shards:
        with safe_open(str(gemma / name), framework="pt") as f:
            assert f.metadata() == {"format": "pt"}
            assert {k for k, v in index["weight_map"].items() if v == name} == set(f.keys())
            total += sum(2 * int(np.prod(f.get_slice(k).get_shape())) for k in f.keys())
    assert total == index["metadata"]["total_size"]


def test_tiny_values(tiny):
    """Header and values as safetensors reads them: metadata, ones / zeros / statistics, 0.02-std weights."""
    with safe_open(tiny["checkpoint"], framework="pt") as f:
        assert f.metadata()["model_version"] == synthetic.MODEL_VERSION
        assert json.loads(f.metadata()["config"]) == synthetic.checkpoint_config(LAYERS, tiny=True)
        ones = f.get_tensor(f"{DIT_PREFIX}transformer_blocks.0.attn1.q_norm.weight")
        assert ones.dtype == torch.bfloat16
        assert bool((ones == 1).all())
        assert bool((f.get_tensor("vae.per_channel_statistics.std-of-means") == 1).all())
        weight = f.get_tensor(f"{DIT_PREFIX}transformer_blocks.0.ff.net.0.proj.weight").float()
        assert abs(float(weight.std()) / synthetic_files.NORMAL_STD - 1) < SYNTHETIC_STD
        assert abs(float(weight.mean())) < 0.1 * synthetic_files.NORMAL_STD
        filters = [k for k in f.keys() if k.endswith(".filter")]  # kaiser windows, as ltx-core computes them
        assert len(filters) > 100
        assert all(float(f.get_tensor(k).float().sum()) == pytest.approx(1, abs=0.02) for k in filters)


def test_tiny_files_load_in_ltx_pipelines(tiny):
    """ModelLedger builds every model (LoRA fused into the DiT) with no parameter or buffer left unloaded.
    ltx-core 1.0.0 sizes the text projection for Gemma 3 12B: patched to the directory's Gemma, as upstream reads it."""
    lora = LoraPathStrengthAndSDOps(tiny["distilled_lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
    upsampler = tiny["spatial_upsampler"]
    ledger = ModelLedger(
        torch.bfloat16, torch.device("cpu"), tiny["checkpoint"], spatial_upsampler_path=upsampler, loras=(lora,)
    )
    text = json.loads((pathlib.Path(tiny["gemma_root"]) / "config.json").read_text())["text_config"]
    gemma = encoder_configurator.GEMMA3_CONFIG_FOR_LTX
    sizes = {"hidden_size": text["hidden_size"], "num_hidden_layers": text["num_hidden_layers"]}
    gemma = dataclasses.replace(gemma, text_config=dataclasses.replace(gemma.text_config, **sizes))
    names = (
        "transformer",
        "video_encoder",
        "video_decoder",
        "audio_encoder",
        "audio_decoder",
        "vocoder",
        "spatial_upsampler",
    )
    with mock.patch.object(encoder_configurator, "GEMMA3_CONFIG_FOR_LTX", gemma):
        for name in (*names, "gemma_embeddings_processor"):
            model = getattr(ledger, name)()
            assert not [k for k, v in (*model.named_parameters(), *model.named_buffers()) if v.is_meta], name


def test_tiny_gemma_directory_loads_in_transformers_and_ltx_core(tiny):
    """transformers maps the 4.5x names onto its own with nothing missing or left over; ltx-core's tokenizer
    (AutoTokenizer) and ours give the same ids over Gemma's 262,145 tokens; the image processor loads."""
    root = tiny["gemma_root"]
    model, info = Gemma3ForConditionalGeneration.from_pretrained(root, output_loading_info=True)
    assert {k: list(v) for k, v in info.items()} == {k: [] for k in info}
    assert model.config.text_config.num_hidden_layers == LAYERS
    reference = LTXVGemmaTokenizer(root, 64)
    assert len(reference.tokenizer) == 262145
    ours = LTXGemmaTokenizer.from_root(root, 64).tokenize_with_weights(PROMPT)["gemma"]
    assert ours == [(int(t), int(w)) for t, w in reference.tokenize_with_weights(PROMPT)["gemma"]]
    assert AutoImageProcessor.from_pretrained(root, local_files_only=True).size == {"height": 896, "width": 896}
    assert (pathlib.Path(root) / "tokenizer.model").stat().st_size > 0


def test_text_encoder_needs_the_gemma_directory(tiny):
    with pytest.raises(ValueError, match="needs files.gemma_root"):
        TextEncoder.from_files(CheckpointFiles(tiny["checkpoint"]), flow="one-stage")


def test_writer_is_deterministic_and_leaves_nothing_behind_on_failure(tmp_path):
    tensors = {"b": synthetic_files.Planned((3, 5)), "a": synthetic_files.Planned((7,), "ones")}
    for folder, seed in (("one", 0), ("two", 0), ("three", 1)):
        (tmp_path / folder).mkdir()
        synthetic_files.write_safetensors(tmp_path / folder / "x.safetensors", tensors, {"k": "v"}, seed, workers=2)
    one, two, three = ((tmp_path / f / "x.safetensors").read_bytes() for f in ("one", "two", "three"))
    assert one == two
    assert one != three
    with safe_open(str(tmp_path / "one" / "x.safetensors"), framework="pt") as f:
        assert list(f.keys()) == ["a", "b"]
        assert f.metadata() == {"k": "v"}
        assert f.get_tensor("b").shape == (3, 5)
    full_disk = mock.patch.object(synthetic_files, "_chunk", side_effect=OSError("disk full"))
    with full_disk, pytest.raises(OSError, match="disk"):
        synthetic_files.write_safetensors(tmp_path / "y.safetensors", tensors, None, 0, workers=2)
    assert not list(tmp_path.glob("y.safetensors*"))
    with pytest.raises(ValueError, match="layers must be a positive layer count"):
        synthetic.make_synthetic_checkpoint(tmp_path, layers=0)
    with pytest.raises(ValueError, match="model must be one of 2.3, 2.5, got '2.4'"):
        synthetic.make_synthetic_checkpoint(tmp_path, model="2.4")


# Two prompts: two Gemma encodings and four DiT forwards, each a chain of 48 programs over the mesh. Before
# ltx_jax.parallel.launch, the same command with four prompts aborted in 4 of 4 runs (XLA: "Expected 8 threads to
# join the rendezvous, but only 7 of them arrived"), right after Gemma loaded; tests/test_launch.py's chain aborts
# every time without it.
STRESS_PROMPTS = ("a fox", "a wolf")
STRESS_TIMEOUT_S = 400


def test_generate_on_full_depth_tiny_files_survives_chains_of_collective_programs(tmp_path):
    """scripts/generate.py --mesh 8 as a user runs it (its own process: XLA aborts the whole process) on --tiny
    files of all 48 DiT and Gemma layers: every video is written, the process ends with status 0."""
    files = synthetic.make_synthetic_checkpoint(tmp_path / "files", tiny=True, workers=2)
    out = tmp_path / "out.mp4"
    command = [
        sys.executable, "scripts/generate.py", "--mesh", "8", "--checkpoint-path", files["checkpoint"],
        "--gemma-root", files["gemma_root"], "--height", "128", "--width", "192", "--num-frames", "9",
        "--num-inference-steps", "2", "--output-path", str(out),
        *(arg for prompt in STRESS_PROMPTS for arg in ("--prompt", prompt)),
    ]  # fmt: skip
    root = pathlib.Path(__file__).parents[1]
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=STRESS_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("out-*.mp4")) == ["out-001.mp4", "out-002.mp4"]
