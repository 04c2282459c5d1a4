"""LTX-2.5's Gemma 4 text encoder: the packed file encodes as ltx-core 1.2.0 does (recorded fixture), every hidden
state equals transformers' `Gemma4UnifiedModel` (live), the weights shard over 8 simulated devices, bad configs
and files are refused by name."""

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ltx_core_twin import relative_error
from safetensors.numpy import save_file
from tolerances import FLOAT32
from transformers import Gemma4UnifiedConfig, Gemma4UnifiedModel

from ltx_jax.convert.safetensors_file import SafetensorsFile, lazy_tensors
from ltx_jax.parallel import make_mesh
from ltx_jax.text_encoders.gemma import build_prompt_encoder
from ltx_jax.text_encoders.gemma.encoders import GemmaTextEncoder
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import gemma_text_state_dict, place_gemma_tensors
from ltx_jax.text_encoders.gemma.encoders.gemma4_config import Gemma4ModelConfig
from ltx_jax.text_encoders.gemma.encoders.gemma4_configurator import (
    GEMMA4_IGNORED_KEYS,
    GEMMA4_TEXT_KEY_MAP,
    abstract_gemma4,
    create_gemma4_model,
)
from ltx_jax.text_encoders.gemma.gemma_assets import GemmaAssets, check_gemma_version

FIXTURES = Path(__file__).parent / "fixtures" / "ltx25"  # tests/record_ltx25_fixtures.py wrote them
PACKED = FIXTURES / "gemma4_text_encoder.safetensors"
TRANSFORMER = FIXTURES / "ltx25_transformer.safetensors"
BRANCH_EFFECT = 1e-3  # a config detail that matters moves some hidden state by far more than the tolerance

SEQ, PAD_COUNTS = 12, (4, 0)  # left-padded batch of 2; SEQ exceeds the sliding window
TEXT = {
    "model_type": "gemma4_unified_text",
    "vocab_size": 300,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "global_head_dim": 16,
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "sliding_window": 5,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "num_hidden_layers": 5,
}
CONFIG = {"model_type": "gemma4_unified", "text_config": TEXT, "vision_config": None, "audio_config": None}


@pytest.fixture(scope="module")
def reference() -> Gemma4UnifiedModel:
    """transformers' model with every norm and layer scalar away from 1, so each one matters."""
    torch.manual_seed(0)
    model = Gemma4UnifiedModel(Gemma4UnifiedConfig.from_dict(CONFIG)).eval()
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if name.endswith(("norm.weight", "layer_scalar")):
                tensor.copy_(torch.rand_like(tensor) + 0.5)
    return model


def batch() -> tuple[np.ndarray, np.ndarray]:
    ids = np.random.default_rng(0).integers(1, TEXT["vocab_size"], (len(PAD_COUNTS), SEQ))
    mask = np.stack([np.arange(SEQ) >= p for p in PAD_COUNTS]).astype(np.int64)
    return np.where(mask == 1, ids, 0), mask


def largest_error(reference: Gemma4UnifiedModel, cfg: Gemma4ModelConfig) -> float:
    """Max over every hidden state (padded positions included) of ours against transformers'."""
    state_dict = {"model." + k: v.numpy() for k, v in reference.state_dict().items()}
    tensors = gemma_text_state_dict(state_dict, key_map=GEMMA4_TEXT_KEY_MAP, ignored=GEMMA4_IGNORED_KEYS)
    model = place_gemma_tensors(
        abstract_gemma4(cfg, jnp.float32), tensors, None, config_name="", label="", progress=False
    )
    ids, mask = batch()
    ours = model(jnp.asarray(ids), jnp.asarray(mask))
    with torch.no_grad():
        theirs = reference(
            input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), output_hidden_states=True
        ).hidden_states
    assert len(ours) == len(theirs) == TEXT["num_hidden_layers"] + 1
    return max(relative_error(np.asarray(a), b) for a, b in zip(ours, theirs, strict=True))


def test_hidden_states_equal_transformers(reference):
    """Sliding and full layers of different widths, values from the keys, proportional RoPE, v_norm, layer
    scalars; the embeddings, every layer output and the final norm, padded positions included."""
    assert largest_error(reference, Gemma4ModelConfig.from_hf_dict(CONFIG)) <= FLOAT32


@pytest.mark.parametrize(
    "change",
    [
        {"sliding_window": SEQ},
        {"full_rope": {"rope_type": "proportional", "partial_rotary_factor": 1.0, "rope_theta": 1e6}},
        {"sliding_rope": {"rope_type": "default", "rope_theta": 1e6}},
    ],
    ids=["sliding_window", "partial_rotary_factor", "sliding_theta"],
)
def test_each_config_detail_matters(reference, change):
    cfg = Gemma4ModelConfig.from_hf_dict(CONFIG)
    rope = {k: type(cfg.full_rope)(**v) for k, v in change.items() if k.endswith("_rope")}
    cfg = dataclasses.replace(cfg, **{**change, **rope})
    assert largest_error(reference, cfg) > BRANCH_EFFECT


def test_packed_file_encodes_as_ltx_core_1_2_0():
    """The LTX-2.5 text-encoder file, packed by ltx-core 1.2.0: its tokenizer's ids and mask (1024 long), and
    `LTXGemmaTextEncoder.encode`'s hidden states, on one device and split over 8."""
    recorded = np.load(FIXTURES / "gemma4_encode.npz")
    prompts, last = [str(p) for p in recorded["prompts"]], int(recorded["last_positions"])
    assets = GemmaAssets.load(PACKED)
    tokenizer = assets.tokenizer()
    ids, mask = tokenizer.tokenize(prompts)
    np.testing.assert_array_equal(ids, recorded["input_ids"])
    np.testing.assert_array_equal(mask, recorded["attention_mask"])
    for mesh in (None, make_mesh(8)):
        encoder = GemmaTextEncoder(create_gemma4_model(assets, param_dtype=jnp.float32, mesh=mesh), tokenizer)
        hidden, encoded_mask = encoder.encode(prompts)
        np.testing.assert_array_equal(np.asarray(encoded_mask), recorded["attention_mask"])
        assert relative_error(np.asarray(hidden)[:, -last:], recorded["hidden_states"]) <= FLOAT32


def test_prompt_contexts_from_the_two_files_equal_ltx_core_1_2_0():
    """Prompt -> Gemma 4 -> the embeddings processor loaded from the transformer file (connectors, config) and
    the text-encoder file (projections) together, as upstream loads it: video and audio contexts, mask."""
    recorded = np.load(FIXTURES / "embeddings_processor.npz")
    prompts, first = (
        [str(p) for p in np.load(FIXTURES / "gemma4_encode.npz")["prompts"]],
        int(recorded["context_positions"]),
    )
    transformer = SafetensorsFile(TRANSFORMER)
    encoder = build_prompt_encoder(
        PACKED,
        json.loads(transformer.metadata["config"]),
        lazy_tensors(transformer),
        gemma_dtype=jnp.float32,
        ltx_metadata=transformer.metadata,
        ltx_checkpoint_path=TRANSFORMER,
    )
    outputs = encoder.encode_prompts(prompts)
    for name, index in (("video", 0), ("audio", 1)):
        ours = np.concatenate([np.asarray(out[index])[:, :first] for out in outputs])
        assert relative_error(ours, recorded[name]) <= FLOAT32, name
    np.testing.assert_array_equal(np.concatenate([np.asarray(o[2]) for o in outputs]), recorded["attention_mask"])
    with pytest.raises(ValueError, match="Gemma 4, which cannot generate text"):
        encoder.enhancer()


@pytest.mark.parametrize(
    ("metadata", "config", "message"),
    [
        ({"gemma_source_checkpoint": '{"gemma_version": "v2"}'}, {"gemma_version": "v1"}, "trained with Gemma 'v2'"),
        ({"model_version": "2.5.0"}, {"gemma_version": "v1"}, "names no gemma_source_checkpoint"),
        ({"model_version": "2.3.0"}, {"model_type": "gemma4_unified"}, "takes a Gemma 3 text encoder"),
    ],
    ids=["other-version", "version-missing", "gemma4-for-2.3"],
)
def test_a_text_encoder_of_another_transformer_is_refused_naming_both_files(metadata, config, message):
    with pytest.raises(ValueError, match=f"{message}.*te.safetensors"):
        check_gemma_version(metadata, config, transformer="dit.safetensors", text_encoder="te.safetensors")


def test_bad_configs_and_files_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="num_kv_shared_layers"):
        Gemma4ModelConfig.from_hf_dict({**CONFIG, "text_config": {**TEXT, "num_kv_shared_layers": 2}})
    with pytest.raises(ValueError, match="'gemma3'.*Gemma 4 unified"):
        Gemma4ModelConfig.from_hf_dict({"model_type": "gemma3"})
    rope = {"full_attention": {"rope_type": "yarn", "rope_theta": 1e6}}
    with pytest.raises(ValueError, match="'rope_type': 'yarn'.*implements rope_type 'default' and 'proportional'"):
        Gemma4ModelConfig.from_hf_dict({**CONFIG, "text_config": {**TEXT, "rope_parameters": rope}})
    with pytest.raises(FileNotFoundError, match="neither a directory nor a .safetensors file"):
        GemmaAssets.load(tmp_path / "missing.safetensors")
    dit = tmp_path / "transformer.safetensors"
    save_file({"model.diffusion_model.x": np.zeros(2, np.float32)}, str(dit))
    with pytest.raises(ValueError, match="no metadata key 'gemma_config'.*--text-encoder-path"):
        GemmaAssets.load(dit)
    with pytest.raises(ValueError, match="1 unknown keys: model.extra"):
        gemma_text_state_dict({"model.extra": 0}, key_map=GEMMA4_TEXT_KEY_MAP, ignored=GEMMA4_IGNORED_KEYS)
