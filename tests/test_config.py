"""LTXConfig: validation, checkpoint metadata, and the real model sizes (shapes only)."""

from dataclasses import replace

import pytest
from flax import nnx

import ltx_jax

# The 'transformer' section of an LTX-2.3 checkpoint's `config` metadata.
LTX2_3_METADATA = {
    "transformer": {
        "_class_name": "AVTransformer3DModel",
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "attention_head_dim": 128,
        "attention_type": "default",
        "caption_channels": 3840,
        "cross_attention_dim": 4096,
        "double_self_attention": False,
        "dropout": 0.0,
        "in_channels": 128,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-06,
        "norm_num_groups": 32,
        "num_attention_heads": 32,
        "num_embeds_ada_norm": 1000,
        "num_layers": 48,
        "num_vector_embeds": None,
        "only_cross_attention": False,
        "cross_attention_norm": True,
        "out_channels": 128,
        "upcast_attention": False,
        "use_linear_projection": False,
        "qk_norm": "rms_norm",
        "standardization_norm": "rms_norm",
        "positional_embedding_type": "rope",
        "positional_embedding_theta": 10000.0,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "timestep_scale_multiplier": 1000,
        "av_ca_timestep_scale_multiplier": 1000.0,
        "causal_temporal_positioning": True,
        "audio_num_attention_heads": 32,
        "audio_attention_head_dim": 64,
        "use_audio_video_cross_attention": True,
        "share_ff": False,
        "audio_out_channels": 128,
        "audio_cross_attention_dim": 2048,
        "audio_positional_embedding_max_pos": [20],
        "av_cross_ada_norm": True,
        "use_embeddings_connector": True,
        "connector_attention_head_dim": 128,
        "connector_num_attention_heads": 32,
        "connector_num_layers": 8,
        "connector_positional_embedding_max_pos": [4096],
        "connector_num_learnable_registers": 128,
        "connector_norm_output": True,
        "use_middle_indices_grid": True,
        "apply_gated_attention": True,
        "connector_apply_gated_attention": True,
        "caption_projection_first_linear": False,
        "caption_projection_second_linear": False,
        "caption_proj_input_norm": False,
        "connector_learnable_registers_std": 1,
        "caption_proj_before_connector": True,
        "audio_connector_attention_head_dim": 64,
        "audio_connector_num_attention_heads": 32,
        "cross_attention_adaln": True,
        "text_encoder_norm_type": "per_token_rms",
        "rope_type": "split",
        "frequencies_precision": "float64",
    }
}


def test_from_metadata_reads_ltx2_3():
    cfg = ltx_jax.LTXConfig.from_metadata(LTX2_3_METADATA)
    assert cfg == ltx_jax.LTXConfig.ltx2_3()
    assert cfg.caption_channels is None
    assert cfg.double_precision_rope
    assert cfg.av_ca_timestep_scale_multiplier == 1000


def test_from_metadata_19b_keeps_caption_projection_and_overrides():
    section = dict(
        LTX2_3_METADATA["transformer"],
        caption_proj_before_connector=False,
        apply_gated_attention=False,
        cross_attention_adaln=False,
    )
    cfg = ltx_jax.LTXConfig.from_metadata({"transformer": section}, num_layers=2)
    assert cfg == ltx_jax.LTXConfig.ltx2_19b(num_layers=2)


@pytest.mark.parametrize(
    "cfg",
    [ltx_jax.LTXConfig.ltx2_19b(), ltx_jax.LTXConfig.ltx2_3(), ltx_jax.LTXConfig.tiny(model_type="video")],
    ids=["19b", "2.3", "tiny_video"],
)
def test_to_metadata_round_trips(cfg):
    assert ltx_jax.LTXConfig.from_metadata(cfg.to_metadata(), model_type=cfg.model_type) == cfg


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "no 'transformer' section"),
        (
            {"transformer": dict(LTX2_3_METADATA["transformer"], qk_norm="layer_norm")},
            "transformer.qk_norm is 'layer_norm'",
        ),
        ({"transformer": dict(LTX2_3_METADATA["transformer"], shiny_new_key=1)}, r"does not know: \['shiny_new_key'\]"),
        (
            {"transformer": dict(LTX2_3_METADATA["transformer"], frequencies_precision="float16")},
            "frequencies_precision",
        ),
    ],
)
def test_from_metadata_errors(config, message):
    with pytest.raises(ValueError, match=message):
        ltx_jax.LTXConfig.from_metadata(config)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model_type": "image"}, r"model_type must be one of \['video', 'audio', 'av'\], got 'image'"),
        ({"rope_type": "linear"}, "rope_type must be one of"),
        (
            {"cross_attention_dim": 48},
            r"cross_attention_dim \(48\) must equal num_attention_heads \* attention_head_dim \(64\)",
        ),
        (
            {"audio_attention_head_dim": 7, "audio_cross_attention_dim": 28},
            r"audio_attention_head_dim \(7\) must be even",
        ),
    ],
)
def test_invalid_config(overrides, message):
    with pytest.raises(ValueError, match=message):
        ltx_jax.LTXConfig.tiny(**overrides)


@pytest.mark.parametrize(
    ("cfg", "billions"),
    [
        (ltx_jax.LTXConfig.ltx2_19b(), 18.876),  # reference §1.11, computed from the module definitions
        (ltx_jax.LTXConfig.ltx2_3(), 18.989),
    ],
)
def test_real_model_sizes(cfg, billions):
    def count(num_layers: int) -> int:
        abstract = nnx.eval_shape(lambda: ltx_jax.LTXModel(replace(cfg, num_layers=num_layers), rngs=nnx.Rngs(0)))
        return sum(v.size for _, v in nnx.to_flat_state(nnx.state(abstract, nnx.Param)))

    # Blocks are identical, so 48 blocks are one block's count 48 times; tracing all 48 in
    # eval_shape takes minutes (flax probes each tracer's sharding).
    one, two = count(1), count(2)
    assert round((one + (cfg.num_layers - 1) * (two - one)) / 1e9, 3) == billions
