"""Official-format safetensors files written by the tests from a tiny ltx-core model."""

import json

import torch
from safetensors.torch import save_file

import ltx_jax
from ltx_jax.convert.state_dict import DIT_PREFIX

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def metadata_config(cfg: ltx_jax.LTXConfig) -> dict:
    """The checkpoint `config` JSON an official file would carry for `cfg`, with a text-encoder key
    and a VAE section the DiT config ignores."""
    config = cfg.to_metadata()
    config["transformer"]["connector_num_layers"] = 2
    return {**config, "vae": {"latent_channels": 16}}


def official_state(state_dict: dict, dtype: torch.dtype) -> dict:
    """The DiT under its checkpoint prefix, plus tensors of the other components a monolith holds."""
    tensors = {DIT_PREFIX + k: v.to(dtype).contiguous() for k, v in state_dict.items()}
    tensors["vae.decoder.conv_in.weight"] = torch.ones(4, 4, dtype=dtype)
    tensors["audio_vae.decoder.conv_in.weight"] = torch.ones(2, 2, dtype=dtype)
    tensors[DIT_PREFIX + "video_embeddings_connector.learnable_registers"] = torch.zeros(8, 4, dtype=dtype)
    return tensors


def fp8_scaled(state_dict: dict, *, input_scales: bool = True) -> tuple[dict, dict]:
    """(fp8-scaled tensors as a checkpoint stores them, the float32 weights they dequantize to). With
    `input_scales` each fp8 weight has a static `input_scale` beside it, a different value for each."""
    stored, dequantized = {}, dict(state_dict)
    for index, (key, value) in enumerate(state_dict.items()):
        if key.startswith("transformer_blocks.") and key.endswith(".weight") and value.ndim == 2:
            scale = value.abs().max().float() / FP8_MAX
            quantized = (value.float() / scale).to(torch.float8_e4m3fn)
            stored[key], stored[key[: -len("weight")] + "weight_scale"] = quantized, scale.reshape(())
            if input_scales:
                stored[key[: -len("weight")] + "input_scale"] = torch.tensor(0.01 + index * 1e-4)
            dequantized[key] = quantized.float() * scale
        else:
            stored[key] = value
    return stored, dequantized


def write_checkpoint(path, cfg: ltx_jax.LTXConfig, tensors: dict, *, with_config: bool = True) -> None:
    metadata = {"model_version": "2.3.0"}
    if with_config:
        metadata["config"] = json.dumps(metadata_config(cfg))
    save_file(tensors, str(path), metadata=metadata)
