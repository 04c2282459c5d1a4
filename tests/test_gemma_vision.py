"""Gemma 3's image path against transformers (CPU float32): the SigLIP tower + multimodal projector
(`Gemma3Model.get_image_features`) loaded from a saved checkpoint in each key layout, and the slow
PIL image processor (`Gemma3ImageProcessorPil`)."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tolerances import FLOAT32
from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil

from ltx_jax.parallel import make_mesh
from ltx_jax.text_encoders.gemma.encoders import (
    Gemma3VisionConfig,
    create_gemma_vision,
    gemma3_pixel_values,
    read_gemma_vision_config,
    read_preprocessor_config,
)

# FLOAT32 (max|jax - torch| / max|torch|) holds by far: a 2-layer tower of width <= 48 differs from torch by float32
# rounding (measured 1.7e-7); a wrong detail moves it far more (measured: erf instead of tanh GELU 8e-5,
# the pool over the transposed grid 0.2, the RMSNorm without its `1 +` 0.9).
TEXT = {
    "vocab_size": 64,
    "hidden_size": 24,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
}
VISION = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "patch_size": 4,
    "image_size": 32,
    "layer_norm_eps": 1e-5,  # not the 1e-6 default: the parsed config is compared below
}
MM_TOKENS = 4  # 8 x 8 patches pooled 4 x 4 to 2 x 2 tokens


def randomize(model: torch.nn.Module) -> torch.nn.Module:
    """transformers starts biases, the projection and the Gemma norm at zero; random values make each one matter."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.copy_(0.5 * torch.randn_like(param) + (0.0 if "soft_emb" in name else 1.0))
            else:
                fan_in = int(np.prod(param.shape[1:])) if param.ndim >= 2 else 10
                param.copy_(torch.randn_like(param) * fan_in**-0.5)
    return model


@pytest.fixture(scope="module")
def hf_model() -> Gemma3ForConditionalGeneration:
    torch.manual_seed(0)
    config = Gemma3Config(text_config=TEXT, vision_config=VISION, mm_tokens_per_image=MM_TOKENS)
    return randomize(Gemma3ForConditionalGeneration(config).eval())


@pytest.fixture(scope="module")
def saved(hf_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("gemma3")
    hf_model.save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def pixels_and_reference(hf_model):
    pixels = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32))
    with torch.no_grad():
        features = hf_model.model.get_image_features(pixels).pooler_output
    assert features.shape == (2, MM_TOKENS, TEXT["hidden_size"])
    return pixels.numpy(), features.numpy()


def relayout(saved_root, target, rename) -> None:
    """`saved_root`'s checkpoint with every key renamed, in `target` (config.json copied)."""
    tensors = load_file(saved_root / "model.safetensors")
    save_file({rename(k): v for k, v in tensors.items()}, target / "model.safetensors")
    (target / "config.json").write_text((saved_root / "config.json").read_text())


LAYOUTS = {
    "transformers 5.x (vision_tower.embeddings...)": None,
    "transformers <= 4.51 (vision_tower.vision_model...)": lambda k: k.replace(
        "vision_tower.", "vision_tower.vision_model."
    ),
    "transformers 4.52+ (model.vision_tower.vision_model...)": lambda k: (
        "model." + k.replace("vision_tower.", "vision_tower.vision_model.")
        if k.startswith(("vision_tower.", "multi_modal_projector."))
        else k
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_image_features_match_transformers(layout, saved, pixels_and_reference, tmp_path):
    rename = LAYOUTS[layout]
    root = saved
    if rename is not None:
        relayout(saved, tmp_path, rename)
        root = tmp_path
    model = create_gemma_vision(root, param_dtype=jnp.float32)
    assert model.config == Gemma3VisionConfig(
        **VISION, num_channels=3, mm_tokens_per_image=MM_TOKENS, text_hidden_size=24
    )
    pixels, reference = pixels_and_reference
    ours = np.asarray(model(jnp.asarray(pixels)))
    error = np.abs(ours - reference).max() / np.abs(reference).max()
    assert error < FLOAT32, f"max|jax - torch| / max|torch| = {error:.3g}"


def test_sharded_load_places_the_same_values(saved, hf_model):
    model = create_gemma_vision(saved, param_dtype=jnp.float32, mesh=make_mesh(8))
    fc1 = model.vision_tower.vision_model.encoder.layers[0].mlp.fc1.kernel[...]
    assert fc1.sharding.spec != ()
    assert len(fc1.addressable_shards) == 8
    reference = hf_model.state_dict()
    np.testing.assert_array_equal(np.asarray(fc1), reference["model.vision_tower.encoder.layers.0.mlp.fc1.weight"].T)
    projection = model.multi_modal_projector.mm_input_projection_weight[...]
    np.testing.assert_array_equal(
        np.asarray(projection), reference["model.multi_modal_projector.mm_input_projection_weight"]
    )


def test_config_without_vision_config_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3_text", **TEXT}))
    with pytest.raises(ValueError, match="multimodal Gemma 3 directory"):
        read_gemma_vision_config(tmp_path)
    with pytest.raises(ValueError, match="gelu_pytorch_tanh"):
        Gemma3VisionConfig.from_hf_dict({"vision_config": {**VISION, "hidden_act": "gelu"}})


def test_unknown_checkpoint_key_is_refused(saved, tmp_path):
    relayout(saved, tmp_path, lambda k: k.replace("post_layernorm", "final_layernorm"))
    with pytest.raises(ValueError, match=r"2 unknown keys: vision_tower\.final_layernorm\.bias"):
        create_gemma_vision(tmp_path, param_dtype=jnp.float32)


@pytest.mark.parametrize(("shape", "size"), [((37, 53, 3), 32), ((37, 53, 3), 896), ((64, 41, 3), 64)])
def test_pixel_values_match_transformers(shape, size):
    image = np.random.default_rng(size).integers(0, 256, shape, dtype=np.uint8)
    processor = Gemma3ImageProcessorPil(size={"height": size, "width": size})
    reference = processor(images=image, return_tensors="np")["pixel_values"]
    ours = gemma3_pixel_values(image, size)
    assert ours.shape == reference.shape == (1, 3, size, size)
    assert ours.dtype == reference.dtype == np.float32
    np.testing.assert_array_equal(ours, reference)


def test_preprocessor_config_is_applied(tmp_path):
    config = {
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_pan_and_scan": None,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.48, 0.45, 0.4],
        "image_std": [0.26, 0.26, 0.27],
        "image_processor_type": "Gemma3ImageProcessor",
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 40, "width": 40},
    }
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    image = np.random.default_rng(3).integers(0, 256, (29, 71, 3), dtype=np.uint8)
    hf_kwargs = {k: v for k, v in config.items() if k not in ("image_processor_type", "do_convert_rgb")}
    reference = Gemma3ImageProcessorPil(**hf_kwargs)(images=image, return_tensors="np")["pixel_values"]
    ours = gemma3_pixel_values(image, **dataclasses.asdict(read_preprocessor_config(tmp_path)))
    np.testing.assert_array_equal(ours, reference)

    (tmp_path / "preprocessor_config.json").write_text(json.dumps({**config, "do_pan_and_scan": True}))
    with pytest.raises(ValueError, match="do_pan_and_scan"):
        read_preprocessor_config(tmp_path)
