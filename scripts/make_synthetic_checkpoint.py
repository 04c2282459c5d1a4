"""Random-weight LTX-2.3 files with the official tensor names, shapes, dtypes and metadata (`--model 2.5`:
LTX-2.5's per-component files, synthetic_ltx25.py).

    python scripts/make_synthetic_checkpoint.py OUT_DIR [--model 2.5] [--layers N] [--gemma-layers N] [--tiny]
        [--seed S]

Loading, memory and time can then be measured at real size without downloading weights. OUT_DIR gets
(sizes at full size, all bf16):
  ltx-2.3-22b-dev.safetensors (46.1 GB: DiT 38.0)   DiT, text connectors, text embedding projection, video
      VAE and audio VAE (encoder, decoder, statistics), BigVGAN v2 + BWE vocoder; `__metadata__`: `config`
      (transformer, vae, scheduler, audio_vae, vocoder) and `model_version` "2.3.0"
  ltx-2.3-spatial-upscaler-x2-1.0.safetensors (1.0 GB)   the x2 latent upsampler, `config` metadata
  ltx-2.3-22b-distilled-lora-384.safetensors (7.4 GB)   `diffusion_model.<module>.lora_{A,B}.weight`
  gemma-3-12b-it-qat-q4_0-unquantized/ (24.4 GB)   config.json, 5 GB shards model-0000i-of-0000n.safetensors
      and their index, tokenizer.json, tokenizer.model, tokenizer_config.json, special_tokens_map.json,
      preprocessor_config.json
  manifest.json   {"checkpoint", "spatial_upsampler", "distilled_lora", "gemma_root"}: the paths above

Shapes and names come from the builders, never from a list here. Each ltx-core model is built by its
configurator from the config written into the file, on the meta device (the vocoder on the CPU, as it
computes its anti-aliasing filters); its state-dict keys are mapped back through the inverse of the
SDOps that ltx-pipelines' ModelLedger loads it with, each file key checked to load as that key through
ltx-core's own `apply_to_key`. Gemma's come from transformers' Gemma3 on the meta device, named as
transformers 4.5x saved the official directory (`language_model.model.*`, `vision_tower.vision_model.*`,
`multi_modal_projector.*`, no tied lm_head).

Config values: the DiT from `LTXConfig.ltx2_3().to_metadata()` (so also LTXModel keywords such as ff_bias
that the official config may lack); connectors, VAEs, audio VAE, vocoder, scheduler and upsampler as
ltx2-reference.md §2, benchmarks/bench_vae_memory.py and third-party dumps of the 2.3 files' configs (§2's
[3p]) give them, with the keys those dumps show that no builder reads; the 12B Gemma from ltx-core's
config (ltx_jax/text_encoders/gemma/config.py). Not known, so assumed: the LoRA's modules (every attention
projection and feed-forward Linear of every block; no alpha, no metadata), Gemma's token strings (the
vocabulary size and the special tokens' ids are Gemma's), config keys beyond those dumps, and dtypes.

`--layers N` / `--gemma-layers N` write N DiT / Gemma layers at real width; the configs say N, and the
text embedding projection reads Gemma's N + 1 hidden states (ltx-core 1.0.0 builds a 48-layer Gemma
whatever the directory says, so only the full Gemma loads there). `--tiny` keeps every key with small
widths (8 heads, 16 latent channels, a 32-wide Gemma) so that the two-stage flow runs on a CPU. Values:
bf16 normal(0, 0.02) (65,536 quantiles indexed by random bits), 1 / 0 for norm weights / biases, VAE
statistics mean 0 and std 1, and the buffers ltx-core computes as it computes them. Files are written
tensor by tensor from a thread pool as NAME.partial, renamed when complete (synthetic_files.py; the Gemma
directory: synthetic_gemma.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import torch
from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP, ContentReplacement, SDOps
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator
from ltx_core.model.upsampler import LatentUpsamplerConfigurator
from ltx_core.model.video_vae import model_configurator as video_vae
from ltx_core.text_encoders.gemma.config import GEMMA3_CONFIG_FOR_LTX
from ltx_core.text_encoders.gemma.encoders import encoder_configurator
from synthetic_files import Planned, model_tensors, write_json, write_safetensors
from synthetic_gemma import gemma_config, write_gemma

from ltx_jax.config import LTXConfig

CHECKPOINT, UPSAMPLER = "ltx-2.3-22b-dev.safetensors", "ltx-2.3-spatial-upscaler-x2-1.0.safetensors"
LORA, GEMMA_ROOT = "ltx-2.3-22b-distilled-lora-384.safetensors", "gemma-3-12b-it-qat-q4_0-unquantized"
MODEL_VERSION, LORA_RANK, TINY_LORA_RANK = "2.3.0", 384, 8
MODELS = ("2.3", "2.5")  # --model: LTX-2.3's single checkpoint, or LTX-2.5's split files (synthetic_ltx25.py)
LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2")  # ends of module paths
GEMMA_SHARD_BYTES, TINY_GEMMA_SHARD_BYTES = 5 * 10**9, 8 * 10**6  # save_pretrained's "5GB"; several tiny shards
DIT_PREFIX = "model.diffusion_model."

_TRANSFORMER = {  # beyond LTXConfig: connectors (§2: 8 layers, 32x128 / 32x64, gated, max_pos [4096]), V2 text path
    "_class_name": "AVTransformer3DModel", "attention_type": "default", "caption_channels": 3840,
    "norm_num_groups": 32, "causal_temporal_positioning": True, "use_embeddings_connector": True,
    "connector_attention_head_dim": 128, "connector_num_attention_heads": 32, "connector_num_layers": 8,
    "connector_positional_embedding_max_pos": [4096], "connector_num_learnable_registers": 128,
    "connector_norm_output": True, "connector_apply_gated_attention": True, "caption_projection_first_linear": False,
    "caption_projection_second_linear": False, "caption_proj_input_norm": False,
    "connector_learnable_registers_std": 1, "audio_connector_attention_head_dim": 64,
    "audio_connector_num_attention_heads": 32, "text_encoder_norm_type": "per_token_rms",
}  # fmt: skip
_BIGVGAN = {"resblock": "AMP1", "stereo": True, "activation": "snakebeta", "use_tanh_at_final": False,
            "use_bias_at_final": False, "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5]] * 3}  # fmt: skip


def _blocks(suffix: str, multipliers: tuple[int, ...]) -> list[Any]:
    """res_x blocks of 4/6/4/2/2 layers around the space, time, all, all resamplers (the 2.3 VAE)."""
    blocks: list[Any] = []
    for layers, where, multiplier in zip((4, 6, 4, 2), ("space", "time", "all", "all"), multipliers, strict=True):
        blocks += [["res_x", {"num_layers": layers}], [f"compress_{where}{suffix}", {"multiplier": multiplier}]]
    return [*blocks, ["res_x", {"num_layers": 2}]]


SECTIONS: dict[str, Any] = {
    "vae": {  # the decoder is bench_vae_memory.py's "ltx2_3"
        "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 128,
        "encoder_blocks": _blocks("_res", (2, 2, 2, 1)), "decoder_blocks": _blocks("", (2, 2, 1, 2)),
        "scaling_factor": 1.0, "norm_layer": "pixel_norm", "patch_size": 4, "latent_log_var": "uniform",
        "use_quant_conv": False, "causal_decoder": False, "timestep_conditioning": False,
        "normalize_latent_channels": False, "encoder_base_channels": 128, "decoder_base_channels": 128,
        "spatial_padding_mode": "zeros",
    },
    "scheduler": {"_class_name": "RectifiedFlowScheduler", "_diffusers_version": "0.25.1", "num_train_timesteps": 1000,
                  "shifting": None, "base_resolution": None, "sampler": "LinearQuadratic"},
    "audio_vae": {
        "model": {"params": {"ddconfig": {
            "double_z": True, "mel_bins": 64, "z_channels": 8, "resolution": 256, "downsample_time": False,
            "in_channels": 2, "out_ch": 2, "ch": 128, "ch_mult": [1, 2, 4], "num_res_blocks": 2, "attn_resolutions": [],
            "dropout": 0.0, "mid_block_add_attention": False, "norm_type": "pixel", "causality_axis": "height"},
            "sampling_rate": 16000}},
        "preprocessing": {
            "audio": {"sampling_rate": 16000, "max_wav_value": 32768.0, "duration": 5.12, "stereo": True,
                      "causal_padding": 3},
            "stft": {"filter_length": 1024, "hop_length": 160, "win_length": 1024, "causal": True},
            "mel": {"n_mel_channels": 64, "mel_fmin": 0, "mel_fmax": 8000}},
    },
    "vocoder": {  # BigVGAN v2 at 16 kHz (160 samples per mel frame), then the BWE to 48 kHz (3 x 80 per frame)
        "vocoder": {**_BIGVGAN, "upsample_initial_channel": 1536, "upsample_rates": [5, 2, 2, 2, 2, 2],
                    "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4]},
        "bwe": {**_BIGVGAN, "upsample_initial_channel": 512, "upsample_rates": [6, 5, 2, 2, 2],
                "upsample_kernel_sizes": [12, 11, 4, 4, 4], "apply_final_activation": False,
                "input_sampling_rate": 16000, "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512,
                "win_size": 512, "num_mels": 64},
    },
}  # fmt: skip
UPSAMPLER_CONFIG = {"_class_name": "LatentUpsampler", "in_channels": 128, "mid_channels": 1024,
                    "num_blocks_per_stage": 4, "dims": 3, "spatial_upsample": True, "temporal_upsample": False,
                    "spatial_scale": 2.0, "rational_resampler": False}  # fmt: skip
# --tiny: the same configs with these values (8 heads: Ulysses over 8 simulated devices; audio_in_channels =
# z_channels x 16 latent mel bins; the audio VAE's `ch` = its latent width, as its statistics require).
_TINY_DIT = {"num_attention_heads": 8, "attention_head_dim": 8, "in_channels": 16, "out_channels": 16,
             "cross_attention_dim": 64, "audio_num_attention_heads": 8, "audio_attention_head_dim": 4,
             "audio_in_channels": 32, "audio_out_channels": 32, "audio_cross_attention_dim": 32}  # fmt: skip
_TINY = {
    "transformer": {"connector_num_attention_heads": 8, "connector_attention_head_dim": 8,
                    "audio_connector_num_attention_heads": 8, "audio_connector_attention_head_dim": 4},
    "vae": {"latent_channels": 16, "encoder_base_channels": 16, "decoder_base_channels": 4},
    "audio_vae.model.params.ddconfig": {"ch": 32, "z_channels": 2},
    "vocoder.vocoder": {"upsample_initial_channel": 128},
    "vocoder.bwe": {"upsample_initial_channel": 64},
}  # fmt: skip
TINY_UPSAMPLER = {"in_channels": 16, "mid_channels": 32}


@dataclasses.dataclass(frozen=True)
class Component:
    """An ltx-core model inside the checkpoint: its configurator and the SDOps ltx-pipelines' ModelLedger
    loads it with; `prefixes` undo that renaming, (model-key prefix, file-key prefix), the first match applying."""

    configurator: Any
    sd_ops: SDOps
    prefixes: tuple[tuple[str, str], ...] = ()
    computes_buffers: bool = False  # built on the CPU, not the meta device, for the buffers' values

    def __post_init__(self) -> None:
        if not self.prefixes:  # the SDOps' prefix replacements, reversed, longest model prefix first
            pairs = [(r.replacement, r.content) for r in self.sd_ops.mapping if isinstance(r, ContentReplacement)]
            object.__setattr__(self, "prefixes", tuple(sorted(pairs, key=lambda pair: -len(pair[0]))))


def _ltx_core_audio_vae() -> ModuleType:
    """ltx-core's audio VAE configurators. Its package imports torchaudio, which is not installed (it pins
    another torch): tests/torchaudio_stand_in.py stands in, as in the tests; nothing here calls it."""
    path = Path(__file__).resolve().parents[1] / "tests" / "torchaudio_stand_in.py"
    spec = importlib.util.spec_from_file_location("torchaudio_stand_in", path)
    stand_in = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stand_in)
    with stand_in.torchaudio_stand_in():
        from ltx_core.model.audio_vae import model_configurator  # noqa: PLC0415

    return model_configurator


@functools.cache
def checkpoint_components() -> dict[str, Component]:
    """The models of the checkpoint file, as ltx-pipelines' ModelLedger builds and loads them."""
    audio, processor = _ltx_core_audio_vae(), encoder_configurator
    return {
        "transformer": Component(LTXModelConfigurator, LTXV_MODEL_COMFY_RENAMING_MAP),
        "embeddings processor": Component(
            processor.EmbeddingsProcessorConfigurator, processor.EMBEDDINGS_PROCESSOR_KEY_OPS
        ),
        "video encoder": Component(video_vae.VideoEncoderConfigurator, video_vae.VAE_ENCODER_COMFY_KEYS_FILTER),
        "video decoder": Component(video_vae.VideoDecoderConfigurator, video_vae.VAE_DECODER_COMFY_KEYS_FILTER),
        "audio encoder": Component(audio.AudioEncoderConfigurator, audio.AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER),
        "audio decoder": Component(audio.AudioDecoderConfigurator, audio.AUDIO_VAE_DECODER_COMFY_KEYS_FILTER),
        # Its SDOps strips "vocoder." in a key-value operation; its anti-aliasing filters are computed.
        "vocoder": Component(audio.VocoderConfigurator, audio.VOCODER_COMFY_KEYS_FILTER, (("", "vocoder."),), True),
    }  # fmt: skip


def checkpoint_config(layers: int | None = None, *, tiny: bool = False) -> dict[str, Any]:
    """The checkpoint's `config` metadata: `LTXConfig.ltx2_3()` + `_TRANSFORMER`, and `SECTIONS`."""
    dit = LTXConfig.ltx2_3(**(_TINY_DIT if tiny else {}), **({} if layers is None else {"num_layers": layers}))
    transformer = {k: v for k, v in dit.to_metadata()["transformer"].items() if k != "av_ca_scale_shift_from_sigma"}
    config = json.loads(json.dumps({"transformer": {**transformer, **_TRANSFORMER}, **SECTIONS}))
    for path, values in _TINY.items() if tiny else ():
        functools.reduce(lambda section, part: section[part], path.split("."), config).update(values)
    return config


def loaded_keys(sd_ops: SDOps, file_key: str) -> list[str]:
    """The model keys ltx-core's `SafetensorsStateDictLoader.load` makes of one file key."""
    key = sd_ops.apply_to_key(file_key)
    return [] if key is None else [k for k, _ in sd_ops.apply_to_key_value(key, torch.empty(0))]


def _file_key(name: str, component: Component, key: str) -> str:
    model_prefix, file_prefix = next(p for p in component.prefixes if key.startswith(p[0]))
    file_key = file_prefix + key[len(model_prefix) :]
    if loaded_keys(component.sd_ops, file_key) != [key]:
        raise RuntimeError(
            f"{name}: file key {file_key!r} loads as {loaded_keys(component.sd_ops, file_key)} in ltx-core, "
            f"not as {key!r}; fix this component's prefixes."
        )
    return file_key


def plan_checkpoint(
    config: Mapping[str, Any], gemma: Mapping[str, Any], components: tuple[str, ...] | None = None
) -> dict[str, Planned]:
    """File key -> tensor of the checkpoint of `config`, whose text projection reads `gemma`'s hidden states
    (`text_config`'s width and layer count); `components`: only these of `checkpoint_components()`."""
    text = gemma["text_config"]
    sizes = {"hidden_size": text["hidden_size"], "num_hidden_layers": text["num_hidden_layers"]}
    ltx_gemma = dataclasses.replace(
        GEMMA3_CONFIG_FOR_LTX, text_config=dataclasses.replace(GEMMA3_CONFIG_FOR_LTX.text_config, **sizes)
    )
    planned: dict[str, Planned] = {}
    with mock.patch.object(encoder_configurator, "GEMMA3_CONFIG_FOR_LTX", ltx_gemma):  # upstream reads Gemma's dir
        for name, component in checkpoint_components().items():
            if components is not None and name not in components:
                continue
            with torch.device("cpu" if component.computes_buffers else "meta"):
                model = component.configurator.from_config(config)
            for key, tensor in model_tensors(model).items():
                file_key = _file_key(name, component, key)
                if planned.setdefault(file_key, tensor).shape != tensor.shape:
                    raise RuntimeError(f"{file_key}: the {name} needs {tensor.shape}, not {planned[file_key]}.")
    return planned


def plan_upsampler(config: Mapping[str, Any]) -> dict[str, Planned]:
    """The upsampler file's tensors (ltx-core loads them without renaming)."""
    with torch.device("meta"):
        return model_tensors(LatentUpsamplerConfigurator.from_config(config))


def plan_lora(checkpoint: Mapping[str, Planned], rank: int) -> dict[str, Planned]:
    """`diffusion_model.<module>.lora_A.weight [rank, in]` / `lora_B.weight [out, rank]` over `LORA_TARGETS`."""
    out = {}
    for file_key, tensor in checkpoint.items():
        module = file_key.removeprefix(DIT_PREFIX).removesuffix(".weight")
        block = file_key.startswith(f"{DIT_PREFIX}transformer_blocks.") and len(tensor.shape) == 2
        if block and module.endswith(LORA_TARGETS):
            for part, shape in (("lora_A", (rank, tensor.shape[1])), ("lora_B", (tensor.shape[0], rank))):
                key = f"diffusion_model.{module}.{part}.weight"
                if loaded_keys(LTXV_LORA_COMFY_RENAMING_MAP, key) != [f"{module}.{part}.weight"]:
                    raise RuntimeError(f"LoRA key {key!r} does not load as {module}.{part}.weight in ltx-core.")
                out[key] = Planned(shape)
    return out


def make_synthetic_checkpoint(
    out_dir: str | os.PathLike,
    *,
    layers: int | None = None,
    gemma_layers: int | None = None,
    tiny: bool = False,
    seed: int = 0,
    workers: int | None = None,
    model: str = "2.3",
) -> dict[str, str]:
    """Writes the files of the module docstring under `out_dir` (`model` "2.5": synthetic_ltx25.py's); returns
    the manifest (also manifest.json)."""
    for name, value in (("layers", layers), ("gemma_layers", gemma_layers)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be a positive layer count (or None for all 48), got {value}.")
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}.")
    out, workers = Path(out_dir), workers or os.cpu_count() or 1
    out.mkdir(parents=True, exist_ok=True)
    if model == "2.5":
        from synthetic_ltx25 import make_ltx25_files  # noqa: PLC0415 - it imports this module

        return make_ltx25_files(out, layers=layers, gemma_layers=gemma_layers, tiny=tiny, seed=seed, workers=workers)
    paths = {"checkpoint": CHECKPOINT, "spatial_upsampler": UPSAMPLER, "distilled_lora": LORA, "gemma_root": GEMMA_ROOT}
    manifest = {key: out / name for key, name in paths.items()}
    gemma, config = gemma_config(gemma_layers, tiny=tiny), checkpoint_config(layers, tiny=tiny)
    checkpoint = plan_checkpoint(config, gemma)
    metadata = {"config": json.dumps(config), "model_version": MODEL_VERSION}
    write_safetensors(manifest["checkpoint"], checkpoint, metadata, seed, workers)
    upsampler = {**UPSAMPLER_CONFIG, **(TINY_UPSAMPLER if tiny else {})}
    write_safetensors(
        manifest["spatial_upsampler"], plan_upsampler(upsampler), {"config": json.dumps(upsampler)}, seed, workers
    )
    lora = plan_lora(checkpoint, TINY_LORA_RANK if tiny else LORA_RANK)
    write_safetensors(manifest["distilled_lora"], lora, None, seed, workers)
    write_gemma(manifest["gemma_root"], gemma, seed, workers, TINY_GEMMA_SHARD_BYTES if tiny else GEMMA_SHARD_BYTES)
    written = {key: str(path) for key, path in manifest.items()}
    write_json(out / "manifest.json", written)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory to write the files and manifest.json into")
    parser.add_argument("--layers", type=int, help="DiT layers to write (default: all 48), at real width")
    parser.add_argument("--gemma-layers", type=int, help="Gemma layers to write (default: all 48), at real width")
    parser.add_argument("--tiny", action="store_true", help="small widths, the same keys: runs on a CPU")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random values")
    parser.add_argument("--model", choices=MODELS, default="2.3", help="2.5: LTX-2.5's per-component files")
    args = parser.parse_args()
    manifest = make_synthetic_checkpoint(
        args.out_dir, layers=args.layers, gemma_layers=args.gemma_layers, tiny=args.tiny, seed=args.seed,
        model=args.model,
    )
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
