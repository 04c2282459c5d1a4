"""scripts/synthetic_gemma4.py: the LTX-2.5 text-encoder file's names and shapes against one that ltx-core 1.2.0
packed itself (tests/fixtures/ltx25/), the 12B's config as ltx-jax reads it, and a tiny written file loaded and
run by ltx-jax as a user loads it."""

import json
import pathlib
import sys

import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from transformers import Gemma4UnifiedAudioConfig, Gemma4UnifiedVisionConfig

from ltx_jax.text_encoders.gemma.encoders import GemmaTextEncoder
from ltx_jax.text_encoders.gemma.encoders.gemma4_config import Gemma4ModelConfig, Gemma4Rope

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "scripts"))
import synthetic_gemma4  # noqa: E402
from synthetic_files import Planned  # noqa: E402

PACKED = pathlib.Path(__file__).parent / "fixtures" / "ltx25" / "gemma4_text_encoder.safetensors"
PROJECTION = "text_embedding_projection."
PROMPTS = ["A red fox trots through fresh snow", "ünïcode <|image|>"]
MAX_LENGTH = 16  # tokens per prompt (1024 in production): the forward is the same, only shorter


def file_tensors(path: pathlib.Path) -> tuple[dict[str, str], dict[str, tuple[str, tuple[int, ...]]]]:
    """A safetensors file's metadata and key -> (dtype, shape)."""
    with safe_open(str(path), framework="np") as f:
        return f.metadata(), {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}


def test_plan_has_the_names_and_shapes_ltx_core_1_2_0_packs():
    """The fixture's config and projections planned: every weight of the file 1.2.0 packed, by name and shape."""
    metadata, tensors = file_tensors(PACKED)
    projection = {k: Planned(shape) for k, (_, shape) in tensors.items() if k.startswith(PROJECTION)}
    planned = synthetic_gemma4.plan_text_encoder(json.loads(metadata["gemma_config"]), projection)
    assert {k: t.shape for k, t in planned.items()} == {k: s for k, (dtype, s) in tensors.items() if dtype != "U8"}


def test_config_is_the_12b_as_ltx_jax_reads_it():
    """48 layers, full ones at 5, 11, ..., 47 (a shorter model keeps the pattern, its last layer full); the two
    layer kinds' heads and RoPE; the vision and audio sizes transformers' defaults; real-width shapes."""
    config = synthetic_gemma4.gemma4_config()
    cfg = Gemma4ModelConfig.from_hf_dict(config)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size) == (48, 3840, 15360, 262144)
    assert [i for i, kind in enumerate(cfg.layer_types) if kind == "full_attention"] == list(range(5, 48, 6))
    sliding = (cfg.num_attention_heads, cfg.head_dim, cfg.kv_heads("sliding_attention"), cfg.sliding_window)
    full = (cfg.global_head_dim, cfg.kv_heads("full_attention"), cfg.values_are_keys("full_attention"))
    assert (sliding, full) == ((16, 256, 8, 1024), (512, 1, True))
    ropes = (Gemma4Rope("default", 1e4), Gemma4Rope("proportional", 1e6, 0.25))
    assert (cfg.sliding_rope, cfg.full_rope) == ropes
    kinds = synthetic_gemma4.gemma4_config(8)["text_config"]["layer_types"]
    assert kinds == ["sliding_attention"] * 5 + ["full_attention", "sliding_attention", "full_attention"]
    for name, defaults in (("vision_config", Gemma4UnifiedVisionConfig), ("audio_config", Gemma4UnifiedAudioConfig)):
        assert {key: getattr(defaults(), key) for key in config[name]} == config[name]
    planned = synthetic_gemma4.plan_text_encoder(synthetic_gemma4.gemma4_config(6), {})
    shapes = {key.removeprefix("model.layers."): tensor.shape for key, tensor in planned.items()}
    attention = [shapes.get(f"{layer}.self_attn.{name}_proj.weight") for layer in (0, 5) for name in "qkv"]
    assert attention == [(4096, 3840), (2048, 3840), (2048, 3840), (8192, 3840), (512, 3840), None]  # 5: no v_proj
    assert planned["model.layers.5.layer_scalar"].values.tolist() == [0x3F80]  # 1.0, as the model initialises it
    assert planned["model.embed_tokens.weight"].shape == (262144, 3840)
    assert "lm_head.weight" not in planned  # tied: save_pretrained leaves it out


def test_tiny_file_is_packed_as_1_2_0_packs_and_encodes_in_ltx_jax(tmp_path):
    """A 2-layer tiny file: its metadata, bf16 weights and the asset tensors 1.2.0 packs; ltx-jax's
    `GemmaTextEncoder.from_path` loads it: Gemma's vocabulary with Gemma 4's special ids, finite hidden states."""
    config = synthetic_gemma4.gemma4_config(2, tiny=True)
    projection = {f"{PROJECTION}video_aggregate_embed.weight": Planned((32, 96)),
                  f"{PROJECTION}video_aggregate_embed.bias": Planned((32,))}  # fmt: skip
    path = tmp_path / "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"
    synthetic_gemma4.write_text_encoder(path, config, projection, seed=0, workers=2)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    metadata, tensors = file_tensors(path)
    assert metadata == {"format": "pt", "gemma_config": json.dumps(config)}
    dtypes = {key: dtype for key, (dtype, _) in tensors.items()}
    assets = {key for key, (dtype, _) in file_tensors(PACKED)[1].items() if dtype == "U8"}
    assert dtypes == {**dict.fromkeys(tensors.keys() - assets, "BF16"), **dict.fromkeys(assets, "U8")}

    encoder = GemmaTextEncoder.from_path(path, param_dtype=jnp.float32, max_length=MAX_LENGTH)
    vocabulary = encoder.tokenizer.tokenizer
    assert vocabulary.get_vocab_size() == config["text_config"]["vocab_size"]
    specials = {**synthetic_gemma4.TEXT_TOKENS, **dict(synthetic_gemma4.MULTIMODAL_TOKENS.values())}
    assert {vocabulary.token_to_id(text): text for text in specials.values()} == specials
    hidden, mask = encoder.encode(PROMPTS)
    assert np.asarray(hidden).shape == (len(PROMPTS), MAX_LENGTH, 32, 3)
    assert np.isfinite(np.asarray(hidden)).all()
    assert np.asarray(mask)[:, [0, -1]].tolist() == [[1, 1], [0, 1]]  # the first prompt fills all 16, the second not
