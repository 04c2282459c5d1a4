"""Random-weight LTX-2.5 files, split per component as upstream's 1.2.0 quick start downloads them.

    python scripts/make_synthetic_checkpoint.py OUT_DIR --model 2.5 [--layers N] [--gemma-layers N] [--tiny]

OUT_DIR gets (full size, all bf16; the names are upstream's):
  ltx-2.5-22b-dev-transformer-bf16.safetensors   `model.diffusion_model.*`: the DiT and both text connectors;
      `config` {"transformer"}, `model_version` "2.5.0", `gemma_source_checkpoint` {"gemma_version"}
  ltx-2.5-22b-distilled-transformer-bf16.safetensors   a link to the dev file: the same shapes (random weights)
  gemma4-12b-with-proj-ltx-2.5-bf16.safetensors   Gemma 4 12B with the text embedding projection, its tokenizer
      and config inside (synthetic_gemma4.py)
  ltx-2.5-video-vae-conv-bf16.safetensors   `encoder.*`, `decoder.*`, `per_channel_statistics.*`; `config` {"vae"},
      `model_version` "2.5.0" (the conv decoder)
  ltx-2.5-video-vae-bf16.safetensors   the diffusion VAE (manifest `diffusion_video_vae_path`; pass it as
      --video-vae-path to decode with it): the conv file's `encoder.*` and `per_channel_statistics.*`, and
      `decoder.*` as 1.2.0's loader reads them (fused `qkv`, `t_embedder.mlp.{0,2}`, a `gate_msa` / `gate_mlp` /
      `gate_ctx` per diffusion block); `config` {"vae": {"_class_name": "CausalDiffusionVAE", "latent_channels",
      "encoder": the conv encoder's settings under 1.2.0's nested names, "decoder": `NADiffusionDecoder` with the
      class defaults (--tiny: small stages and kernels), "model_output_type": "v"}}, `model_version` "2.5.0"
  ltx-2.5-audio-vae-bf16.safetensors   `audio_vae.*`, `vocoder.*`; `config` {"audio_vae", "vocoder"}
  ltx-2.5-duration-head-bf16.safetensors   `duration_head.*`; `config` {"transformer", "duration_head"}
  ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors   the x2 latent upsampler, `config`
  ltx-2.5-22b-distilled-lora-450-bf16.safetensors   `diffusion_model.<module>.lora_{A,B}.weight`, rank 450
  manifest.json   the paths above under the names of `CheckpointFiles`' fields

Where the tensors come from: the LTX-2.3 checkpoint's plan (make_synthetic_checkpoint.py: ltx-core's builders
from the config written into the files), split by key prefix into the files above, with what LTX-2.5's config
changes (`ltx25_transformer`): no feed-forward biases in the blocks or the connectors, no prompt AdaLN, and the
keyframe position embedding. tests/test_synthetic_ltx25.py checks the result against a transformer file that
ltx-core 1.2.0 wrote itself (tests/fixtures/ltx25/). Not known, so assumed: the VAEs', vocoder's and upsampler's
configs (2.3's), the duration head's sizes (1.2.0's defaults), the LoRA's modules (as 2.3's), and the diffusion VAE's
decoder config beyond its class defaults (none) and its gates' values (ones); its decoder tensors are planned from
ltx-jax's own `DiffusionVideoDecoder` (the ltx-core in this environment predates it), and tests/test_synthetic_ltx25.py
checks them against a file 1.2.0 loads (tests/fixtures/ltx25_diffusion_decoder/).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import make_synthetic_checkpoint as ltx23
from synthetic_files import Planned, write_json, write_safetensors
from synthetic_gemma4 import gemma4_config, write_text_encoder

from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.abstract import abstract_module
from ltx_jax.model.video_vae import DiffusionDecoderConfig, DiffusionVideoDecoder, diffusion_decoder_config

MODEL_VERSION, GEMMA_VERSION, LORA_RANK = "2.5.0", "gemma4-12b-ltx-v1", 450
FILES = {  # CheckpointFiles' field (or manifest name) -> upstream's file name
    "transformer_path": "ltx-2.5-22b-dev-transformer-bf16.safetensors",
    "distilled_transformer_path": "ltx-2.5-22b-distilled-transformer-bf16.safetensors",
    "text_encoder_path": "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors",
    "video_vae_path": "ltx-2.5-video-vae-conv-bf16.safetensors",
    "diffusion_video_vae_path": "ltx-2.5-video-vae-bf16.safetensors",
    "audio_vae_path": "ltx-2.5-audio-vae-bf16.safetensors",
    "duration_head_path": "ltx-2.5-duration-head-bf16.safetensors",
    "spatial_upsampler_path": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors",
    "distilled_lora": "ltx-2.5-22b-distilled-lora-450-bf16.safetensors",
}
# LTX-2.5's transformer keys beyond 2.3's (ltx-core 1.2.0 `LTXModelConfigurator.from_metadata` reads them).
LTX25_TRANSFORMER = {
    "ff_bias": False, "audio_ff_bias": False, "connector_ff_bias": False, "use_prompt_adaln_single": False,
    "use_keyframes_abs_pos_embedding": True,
}  # fmt: skip
DURATION_HEAD = {"pooler_hidden_dim": 256, "num_queries": 1, "num_pooler_heads": 4, "mlp_hidden": 256}
_TINY_DURATION_HEAD = {"pooler_hidden_dim": 16, "mlp_hidden": 8}
# --tiny diffusion decoder: 16-wide heads (the least the default RoPE split takes), one block per stage, 3x3x3 windows.
TINY_DIFFUSION_DECODER = {
    "head_dim": 16, "t_emb_dim": 16, "stage_channels": [32, 16, 16, 16, 16], "stage_depths": [1, 1, 1, 1, 1],
    "stage_kernels": [[3, 3, 3]] * 5, "stage5_kernel": [3, 3, 3],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 1], [[2, 2, 2], 1], [[2, 2, 2], 1]],
}  # fmt: skip
_ENCODER_KEYS = ("in_channels", "patch_size", "norm_layer", "latent_log_var", "spatial_padding_mode", "dims")
_GATES = ("gate_msa", "gate_mlp", "gate_ctx")
_FF_BIAS = re.compile(r"\.(ff|audio_ff)\.net\.(0\.proj|2)\.bias$")
_PROMPT_ADALN = ("prompt_adaln_single.", "audio_prompt_adaln_single.")
_TEXT_PROJECTION = "text_embedding_projection."


def ltx25_config(layers: int | None = None, *, tiny: bool = False) -> dict[str, Any]:
    """The `config` sections of the LTX-2.5 files: 2.3's with `LTX25_TRANSFORMER`, and the duration head's."""
    config = ltx23.checkpoint_config(layers, tiny=tiny)
    config["transformer"].update(LTX25_TRANSFORMER)
    config["duration_head"] = {**DURATION_HEAD, **(_TINY_DURATION_HEAD if tiny else {})}
    return config


def _ff_bias_flag(name: str) -> str:
    """The config flag that keeps this feed-forward bias: the text connectors', the audio stream's or the video's."""
    if "_embeddings_connector." in name:
        return "connector_ff_bias"
    return "audio_ff_bias" if ".audio_ff." in name else "ff_bias"


def ltx25_transformer(planned: Mapping[str, Planned], transformer: Mapping[str, Any]) -> dict[str, Planned]:
    """2.3's `model.diffusion_model.*` tensors made LTX-2.5's for the `transformer` config section."""
    out = {}
    for key, tensor in planned.items():
        name = key.removeprefix(ltx23.DIT_PREFIX)
        if _FF_BIAS.search(name) and not transformer.get(_ff_bias_flag(name), True):
            continue
        if name.startswith(_PROMPT_ADALN) and not transformer.get("use_prompt_adaln_single", True):
            continue
        out[key] = tensor
    if transformer.get("use_keyframes_abs_pos_embedding", False):
        width = transformer["num_attention_heads"] * transformer["attention_head_dim"]
        out[f"{ltx23.DIT_PREFIX}keyframes_abs_pos_embedding"] = Planned((1, width))
    return out


def plan_transformer(config: Mapping[str, Any], gemma: Mapping[str, Any]) -> dict[str, dict[str, Planned]]:
    """The transformer file's tensors and the text projection (which LTX-2.5 packs with the text encoder)."""
    planned = ltx23.plan_checkpoint(config, gemma, components=("transformer", "embeddings processor"))
    projection = {k: v for k, v in planned.items() if k.startswith(_TEXT_PROJECTION)}
    dit = {k: v for k, v in planned.items() if k.startswith(ltx23.DIT_PREFIX)}
    if set(planned) != set(projection) | set(dit):
        raise RuntimeError(f"unplaced transformer keys: {sorted(set(planned) - set(projection) - set(dit))[:5]}")
    return {"transformer": ltx25_transformer(dit, config["transformer"]), "projection": projection}


def plan_vaes(config: Mapping[str, Any], gemma: Mapping[str, Any]) -> dict[str, dict[str, Planned]]:
    """The video VAE file's tensors (2.3's `vae.*`, unprefixed as upstream's split file) and the audio VAE's."""
    names = ("video encoder", "video decoder", "audio encoder", "audio decoder", "vocoder")
    planned = ltx23.plan_checkpoint(config, gemma, components=names)
    video = {k.removeprefix("vae."): v for k, v in planned.items() if k.startswith("vae.")}
    audio = {k: v for k, v in planned.items() if k.startswith(("audio_vae.", "vocoder."))}
    if len(video) + len(audio) != len(planned):
        raise RuntimeError("VAE keys outside vae., audio_vae. and vocoder.")
    return {"video": video, "audio": audio}


def diffusion_vae_config(vae: Mapping[str, Any], *, tiny: bool) -> dict[str, Any]:
    """The diffusion VAE file's `vae` section: the conv file's encoder `vae` nested as 1.2.0 reads it
    (`_prepare_video_encoder_kwargs`: `blocks`, `out_channels` the latent width) and a `NADiffusionDecoder`."""
    defaults = dataclasses.asdict(DiffusionDecoderConfig())
    decoder = {k: v for k, v in defaults.items() if k not in ("w_chunks", "model_output_type") and v is not None}
    decoder = json.loads(json.dumps({"_class_name": "NADiffusionDecoder", **decoder}))  # tuples as JSON lists
    decoder.update(TINY_DIFFUSION_DECODER if tiny else {}, in_channels=vae["latent_channels"])
    encoder = {k: vae[k] for k in _ENCODER_KEYS if k in vae}
    encoder.update(out_channels=vae["latent_channels"], blocks=vae["encoder_blocks"])
    return {
        "_class_name": "CausalDiffusionVAE", "latent_channels": vae["latent_channels"], "encoder": encoder,
        "decoder": decoder, "model_output_type": "v",
    }  # fmt: skip


def plan_diffusion_decoder(vae: Mapping[str, Any]) -> dict[str, Planned]:
    """`decoder.*` of a CausalDiffusionVAE file for its `vae` section: the decoder's parameters under the names 1.2.0's
    loader reads (the inverse of `diffusion_vae_decoder_state_dict`): `to_q`/`to_k`/`to_v` fused into `qkv`,
    `t_embedder.mlp.{0,2}`, and per diffusion block the gates its linears are folded with (ones)."""
    config = diffusion_decoder_config({"vae": vae})
    decoder = abstract_module(lambda rngs: DiffusionVideoDecoder(config, rngs=rngs))
    out = {}
    for key, (_, _, shape, _) in expected_keys(decoder).items():
        if key.startswith("per_channel_statistics.") or (".qkv.to_" in key and ".qkv.to_q." not in key):
            continue  # the statistics are the encoder's; k and v are packed with q
        name = key.replace("timestep_embedder.linear_1.", "mlp.0.").replace("timestep_embedder.linear_2.", "mlp.2.")
        if ".qkv.to_q." in key:
            name, shape = name.replace(".to_q.", "."), (3 * shape[0], *shape[1:])
        norm = name.rsplit(".", 2)[-2].endswith(("norm", "norm1", "norm2", "norm_out"))
        out[f"decoder.{name}"] = Planned(shape, "ones" if norm and name.endswith(".weight") else "normal")
    for i in range(config.stage_depths[-1]):
        out |= {f"decoder.diff_blocks.{i}.{gate}": Planned((config.width,), "ones") for gate in _GATES}
    return out


def plan_duration_head(video_width: int, audio_width: int, head: Mapping[str, int]) -> dict[str, Planned]:
    """ltx-core 1.2.0's `DurationHead`: two input projections with modality embeddings, a learned-query
    attention pooler (`nn.MultiheadAttention`'s packed layout) and a two-layer MLP."""
    hidden, queries, mlp = head["pooler_hidden_dim"], head["num_queries"], head["mlp_hidden"]
    shapes = {
        "video_input_proj.weight": (hidden, video_width), "video_input_proj.bias": (hidden,),
        "video_modality_emb": (hidden,),
        "audio_input_proj.weight": (hidden, audio_width), "audio_input_proj.bias": (hidden,),
        "audio_modality_emb": (hidden,),
        "attention_pooler.query_tokens": (queries, hidden),
        "attention_pooler.cross_attn.in_proj_weight": (3 * hidden, hidden),
        "attention_pooler.cross_attn.in_proj_bias": (3 * hidden,),
        "attention_pooler.cross_attn.out_proj.weight": (hidden, hidden),
        "attention_pooler.cross_attn.out_proj.bias": (hidden,),
        "mlp_hidden.weight": (mlp, queries * hidden), "mlp_hidden.bias": (mlp,),
        "mlp_out.weight": (1, mlp), "mlp_out.bias": (1,),
    }  # fmt: skip
    return {f"duration_head.{key}": Planned(shape) for key, shape in shapes.items()}


def _metadata(**values: Any) -> dict[str, str]:  # noqa: ANN401
    """safetensors metadata: strings as they are, everything else as JSON (1.2.0 decodes what parses)."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def make_ltx25_files(
    out: Path, *, layers: int | None, gemma_layers: int | None, tiny: bool, seed: int, workers: int
) -> dict[str, str]:
    """Writes the files of the module docstring under `out`; returns the manifest (also manifest.json)."""
    paths = {name: out / file for name, file in FILES.items()}
    config, gemma = ltx25_config(layers, tiny=tiny), gemma4_config(gemma_layers, tiny=tiny)
    transformer = plan_transformer(config, gemma)
    write_safetensors(paths["transformer_path"], transformer["transformer"], _metadata(
        config={"transformer": config["transformer"]}, model_version=MODEL_VERSION,
        gemma_source_checkpoint={"gemma_version": GEMMA_VERSION},
    ), seed, workers)  # fmt: skip
    distilled = paths["distilled_transformer_path"]
    distilled.unlink(missing_ok=True)
    distilled.symlink_to(paths["transformer_path"].name)
    write_text_encoder(paths["text_encoder_path"], gemma, transformer["projection"], seed, workers)
    vaes = plan_vaes(config, gemma)
    video_metadata = _metadata(config={"vae": config["vae"]}, model_version=MODEL_VERSION)
    write_safetensors(paths["video_vae_path"], vaes["video"], video_metadata, seed, workers)
    diffusion = diffusion_vae_config(config["vae"], tiny=tiny)
    encoder = {k: v for k, v in vaes["video"].items() if k.startswith(("encoder.", "per_channel_statistics."))}
    diffusion_metadata = _metadata(config={"vae": diffusion}, model_version=MODEL_VERSION)
    diffusion_tensors = encoder | plan_diffusion_decoder(diffusion)
    write_safetensors(paths["diffusion_video_vae_path"], diffusion_tensors, diffusion_metadata, seed, workers)
    audio_metadata = _metadata(config={"audio_vae": config["audio_vae"], "vocoder": config["vocoder"]})
    write_safetensors(paths["audio_vae_path"], vaes["audio"], audio_metadata, seed, workers)
    video_width, audio_width = (config["transformer"][k] for k in ("cross_attention_dim", "audio_cross_attention_dim"))
    head = plan_duration_head(video_width, audio_width, config["duration_head"])
    widths = {"cross_attention_dim": video_width, "audio_cross_attention_dim": audio_width}
    head_metadata = _metadata(config={"transformer": widths, "duration_head": config["duration_head"]})
    write_safetensors(paths["duration_head_path"], head, head_metadata, seed, workers)
    upsampler = {**ltx23.UPSAMPLER_CONFIG, **(ltx23.TINY_UPSAMPLER if tiny else {})}
    upsampler_plan = ltx23.plan_upsampler(upsampler)
    write_safetensors(paths["spatial_upsampler_path"], upsampler_plan, _metadata(config=upsampler), seed, workers)
    lora = ltx23.plan_lora(transformer["transformer"], ltx23.TINY_LORA_RANK if tiny else LORA_RANK)
    write_safetensors(paths["distilled_lora"], lora, None, seed, workers)
    written = {name: os.fspath(path) for name, path in paths.items()}
    write_json(out / "manifest.json", written)
    return written
