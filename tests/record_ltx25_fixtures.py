"""Records ltx-core 1.2.0's outputs on tiny random LTX-2.5 models into tests/fixtures/ltx25/ (CI has no 1.2.0).

PyPI serves ltx-core 1.0.0 only, so the LTX-2.5 tests compare against what this script wrote. Anyone with the
reference confirms the fixtures with `--check`: it records again into a temporary folder and compares every
tensor, array and metadata value with the committed ones: the random weights come from a seeded torch generator
and must be equal, and so must integers and masks; float outputs must agree within tolerances.RECORDED_FIXTURE,
since another CPU rounds last bits differently. (The files' bytes differ: safetensors writes its metadata in no
fixed order.)

    # an environment of its own: ltx-core and ltx-pipelines 1.2.0 from the LTX-2 repository (packages/*) installed
    # with --no-deps, torch==2.13.0 (CPU), transformers==5.14.1 (5.15 and later cannot build its Gemma 4),
    # einops numpy safetensors accelerate scipy av tokenizers openimageio cloudpickle
    python tests/record_ltx25_fixtures.py [--check]

Writes, per fixture, the model files exactly as upstream ships them (packed by 1.2.0's own helpers) and the
reference's outputs (float32 on the CPU):
    gemma4_text_encoder.safetensors   a 6-layer Gemma 4 (`gemma4_unified`) text encoder packed by
                                      `build_text_encoder_tensors_from_gemma_root`: weights (Comfy-flat keys),
                                      tokenizer, sidecars, `gemma_config` metadata, the feature extractor's
                                      projections
    gemma4_encode.npz                 `LTXGemmaTextEncoder.encode` of PROMPTS, built through the
                                      `SingleGPUModelBuilder` the pipelines use: token ids and mask (1024 each),
                                      and every hidden state at the last LAST_POSITIONS positions
    ltx25_transformer.safetensors     a 2-block LTX-2.5 transformer (`model.diffusion_model.*` with both text
                                      connectors; metadata `config`, `model_version` 2.5.0,
                                      `gemma_source_checkpoint`)
    embeddings_processor.npz          `EmbeddingsProcessor.process_hidden_states` of those hidden states, built
                                      from the transformer and text-encoder files together: the video and audio
                                      contexts at the first CONTEXT_POSITIONS positions, and the mask
    duration_head.safetensors         a duration head (`duration_head.*`; metadata: the connectors' widths, the
                                      head's sizes)
    duration_head.npz                 `DurationHead` on those contexts per prompt (video and audio, each alone),
                                      in seconds; `seconds_to_clamped_num_frames` on a table of seconds, frame
                                      rates and bounds
    vae_attention.npz                 the video VAE's new `attn` block (16 channels) and a conv decoder with one
                                      (`res_x`, `attn`; 32 channels): weights, inputs, outputs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "ltx25"
sys.path.insert(0, str(HERE))
from tolerances import RECORDED_FIXTURE  # noqa: E402
from torchaudio_stand_in import torchaudio_stand_in  # noqa: E402

with torchaudio_stand_in():
    import ltx_core  # noqa: F401 - fails here, not halfway, without the reference
    from ltx_core.duration_head.model_configurator import DurationHeadConfigurator
    from ltx_core.loader.registry import ModelRegistry
    from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
    from ltx_core.model.transformer import LTXModelConfigurator
    from ltx_core.model.video_vae.attention import AttnBlock3D
    from ltx_core.model.video_vae.model_configurator import VideoDecoderConfigurator
    from ltx_core.text_encoders.gemma import (
        EMBEDDINGS_PROCESSOR_KEY_OPS,
        EmbeddingsProcessorConfigurator,
        GemmaTextEncoderConfigurator,
        get_gemma_ops,
        resolve_gemma_weight_paths,
    )
    from ltx_core.text_encoders.gemma.encoders import base_encoder
    from ltx_core.text_encoders.gemma.gemma_assets import (
        build_text_encoder_tensors_from_gemma_root,
        save_text_encoder_safetensors,
    )
    from ltx_pipelines.utils.helpers import seconds_to_clamped_num_frames
    from safetensors.torch import save_file

SEED = 0
GEMMA_VERSION = "gemma4-12b-ltx-v1"
MODEL_VERSION = "2.5.0"
CONTEXT_POSITIONS = 128  # context positions kept: the prompt's tokens, then one period of the 128 registers
# Two padded prompts and one that fills the sliding window several times over; " hello " is out of vocabulary.
PROMPTS = [
    "a cat walks on the street",
    "  the sun  ",
    "a dog runs in the rain , the camera looks at the sea slowly hello",
]
LAST_POSITIONS = 24  # hidden states kept per prompt: every real token and some padding (left-padded to 1024)
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_image>", "<end_of_image>", "<image_soft_token>",
            "<|video|>", "<start_of_audio>", "<end_of_audio>", "<audio_soft_token>"]  # fmt: skip
WORDS = ("the a an of and in on at to with is are it this that cat dog man woman car city street sun sky sea water "
         "tree light walks runs sits looks camera slowly scene night day rain , .").split()  # fmt: skip


def gemma4_config() -> dict:
    """gemma4_unified as the 12B's (five sliding layers, then a full one with wider heads, one KV head whose
    values are the keys, proportional RoPE), tiny; a sliding window of 4 so that it masks real tokens."""
    layer_types = ["sliding_attention"] * 5 + ["full_attention"]
    return {
        "model_type": "gemma4_unified", "architectures": ["Gemma4UnifiedForConditionalGeneration"],
        "gemma_version": GEMMA_VERSION, "tie_word_embeddings": True,
        "boi_token_id": 4, "eoi_token_id": 5, "image_token_id": 6, "video_token_id": 7,
        "boa_token_id": 8, "eoa_token_index": 9, "audio_token_id": 10,
        "text_config": {
            "model_type": "gemma4_unified_text", "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 6, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
            "global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
            "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4, "layer_types": layer_types,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1,
            "bos_token_id": 2, "tie_word_embeddings": True,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
            },
        },
        "vision_config": {"model_type": "gemma4_unified_vision", "patch_size": 4, "pooling_kernel_size": 2,
                          "mm_embed_dim": 16, "mm_posemb_size": 8, "output_proj_dims": 32},
        "audio_config": {"model_type": "gemma4_unified_audio", "audio_embed_dim": 16},
    }  # fmt: skip


def write_gemma_root(root: Path, gen: torch.Generator) -> None:
    """A Hugging Face Gemma 4 directory with random weights: norms and layer scalars away from 1, so a port
    that ignores one of them fails."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers  # noqa: PLC0415
    from transformers import AutoModelForImageTextToText, Gemma4UnifiedConfig  # noqa: PLC0415

    config = gemma4_config()
    model = AutoModelForImageTextToText.from_config(Gemma4UnifiedConfig.from_dict(config))
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if not tensor.is_floating_point() or name.endswith("inv_freq") or "embed_scale" in name:
                continue
            if name.endswith(("norm.weight", "layer_scalar")):
                tensor.copy_(torch.rand(tensor.shape, generator=gen) + 0.5)
            elif tensor.ndim >= 2:
                tensor.copy_(torch.randn(tensor.shape, generator=gen) / math.sqrt(tensor.shape[-1]))
            else:
                tensor.copy_(torch.randn(tensor.shape, generator=gen) * 0.02)
    model.save_pretrained(str(root), safe_serialization=True)
    (root / "config.json").write_text(json.dumps({**json.loads((root / "config.json").read_text()), **config}))
    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIALS, *WORDS]))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.normalizer, tokenizer.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(SPECIALS)
    tokenizer.save(str(root / "tokenizer.json"))
    tokenizer_config = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
                        "pad_token": "<pad>", "unk_token": "<unk>", "padding_side": "left"}  # fmt: skip
    (root / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (root / "processor_config.json").write_text(json.dumps({"processor_class": "Gemma4UnifiedProcessor"}))


def projection_tensors(gen: torch.Generator) -> dict[str, torch.Tensor]:
    """The feature extractor V2's two projections of the 7 stacked hidden states (32 wide), to a 32-wide video
    and a 16-wide audio context, packed beside the weights as upstream packs them."""
    flat = 32 * 7
    return {
        f"text_embedding_projection.{kind}_aggregate_embed.{leaf}": torch.randn(shape, generator=gen) * scale
        for kind, width in (("video", 32), ("audio", 16))
        for leaf, shape, scale in (("weight", (width, flat), flat**-0.5), ("bias", (width,), 0.02))
    }


# Values LTXModelConfigurator.check_config_value asserts (the real architecture).
_REQUIRED = {
    "dropout": 0.0, "attention_bias": True, "num_vector_embeds": None, "activation_fn": "gelu-approximate",
    "num_embeds_ada_norm": 1000, "use_linear_projection": False, "only_cross_attention": False,
    "cross_attention_norm": True, "double_self_attention": False, "upcast_attention": False,
    "standardization_norm": "rms_norm", "norm_elementwise_affine": False, "qk_norm": "rms_norm",
    "positional_embedding_type": "rope", "use_middle_indices_grid": True,
    "use_audio_video_cross_attention": True, "share_ff": False, "av_cross_ada_norm": True,
}  # fmt: skip


def transformer_metadata() -> dict:
    """A 2-block LTX-2.5 DiT with LTX-2.5's switches (no FFN biases, no prompt AdaLN, the keyframe embedding,
    split RoPE, the V2 text path), its cross-attention widths those of the text encoder's projections."""
    config = {
        "_class_name": "AVTransformer3DModel", **_REQUIRED,
        "num_attention_heads": 2, "attention_head_dim": 16, "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 8, "in_channels": 128, "out_channels": 128, "audio_in_channels": 128,
        "audio_out_channels": 128, "cross_attention_dim": 32, "audio_cross_attention_dim": 16, "num_layers": 2,
        "norm_eps": 1e-6, "positional_embedding_theta": 10000.0, "positional_embedding_max_pos": [20, 2048, 2048],
        "audio_positional_embedding_max_pos": [20], "timestep_scale_multiplier": 1000,
        "av_ca_timestep_scale_multiplier": 1000, "rope_type": "split", "frequencies_precision": "float64",
        "apply_gated_attention": True, "cross_attention_adaln": True,
        "ff_bias": False, "audio_ff_bias": False, "use_prompt_adaln_single": False,
        "use_keyframes_abs_pos_embedding": True,
        "caption_proj_before_connector": True, "caption_projection_first_linear": False,
        "caption_proj_input_norm": False, "caption_projection_second_linear": False,
        "text_encoder_norm_type": "per_token_rms", "use_embeddings_connector": True,
        "connector_num_attention_heads": 2, "connector_attention_head_dim": 16,
        "audio_connector_num_attention_heads": 2, "audio_connector_attention_head_dim": 8,
        "connector_num_layers": 1, "connector_positional_embedding_max_pos": [4096],
        "connector_num_learnable_registers": 128, "connector_apply_gated_attention": True,
        "connector_ff_bias": False, "connector_norm_output": True, "connector_learnable_registers_std": 1,
    }  # fmt: skip
    return {"config": {"transformer": config}, "model_version": MODEL_VERSION,
            "gemma_source_checkpoint": {"gemma_version": GEMMA_VERSION}}  # fmt: skip


def randomize(module: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """The module's state dict with seeded random values: norm weights and scalars around 1, matrices
    N(0, 1 / fan_in), other vectors N(0, 0.02^2)."""
    out = {}
    for name, tensor in module.state_dict().items():
        if not tensor.is_floating_point():
            out[name] = tensor
        elif name.endswith(("norm.weight", "layer_scalar", "gamma")) or "std" in name:
            out[name] = torch.rand(tensor.shape, generator=gen) + 0.5
        elif tensor.ndim >= 2:
            out[name] = torch.randn(tensor.shape, generator=gen) / math.sqrt(math.prod(tensor.shape[1:]))
        else:
            out[name] = torch.randn(tensor.shape, generator=gen) * 0.02
    return out


def write_transformer(path: Path, text_encoder: Path, gen: torch.Generator) -> None:
    """The DiT and both text connectors, keyed as upstream's transformer files are."""
    metadata = transformer_metadata()
    with torch.device("cpu"):
        dit = randomize(LTXModelConfigurator.from_metadata(metadata), gen)
        processor = EmbeddingsProcessorConfigurator.with_gemma_model_path(str(text_encoder)).from_metadata(metadata)
    connectors = {
        f"model.diffusion_model.{kind}_embeddings_connector.{key.removeprefix(f'{kind}_connector.')}": value
        for key, value in randomize(processor, gen).items()
        for kind in ("video", "audio")
        if key.startswith(f"{kind}_connector.")
    }
    tensors = {**{f"model.diffusion_model.{k}": v for k, v in dit.items()}, **connectors}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=_json_values(metadata))


def _json_values(metadata: dict) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}


def build_text_encoder(path: Path) -> torch.nn.Module:
    """The text encoder as the pipelines build it. Its HF processor (only prompt enhancement uses it, which
    Gemma 4 unified cannot do) imports torchvision; without it, the builder's processor step returns None."""
    if importlib.util.find_spec("torchvision") is None:
        base_encoder.build_gemma_processor = lambda *_: None
    sd_ops, module_ops = get_gemma_ops(str(path))
    return SingleGPUModelBuilder(
        model_path=resolve_gemma_weight_paths(str(path)),
        model_class_configurator=GemmaTextEncoderConfigurator.with_gemma_model_path(str(path)),
        model_sd_ops=sd_ops,
        module_ops=module_ops,
        registry=ModelRegistry(cache_models=False, cache_weights=False),
    ).build(device=torch.device("cpu"), dtype=torch.float32)


def record_gemma4(out: Path, gen: torch.Generator) -> list:
    path = out / "gemma4_text_encoder.safetensors"
    with tempfile.TemporaryDirectory() as tmp:
        write_gemma_root(Path(tmp), gen)
        tensors, metadata = build_text_encoder_tensors_from_gemma_root(
            tmp, projection_tensors(gen), gemma_version=GEMMA_VERSION
        )
    save_text_encoder_safetensors(path, tensors, metadata)
    encoder = build_text_encoder(path)
    with torch.no_grad():
        encoded = encoder.encode(PROMPTS)
    tokens = [encoder.tokenizer.tokenize_with_weights(p)["gemma"] for p in PROMPTS]
    hidden = np.stack([torch.stack(states, -1)[0, -LAST_POSITIONS:].numpy() for states, _ in encoded])
    np.savez_compressed(
        out / "gemma4_encode.npz",
        prompts=np.array(PROMPTS),
        input_ids=np.array([[t for t, _ in row] for row in tokens], np.int32),
        attention_mask=np.stack([mask[0].numpy() for _, mask in encoded]).astype(np.int32),
        hidden_states=hidden.astype(np.float32),  # (prompts, LAST_POSITIONS, hidden, layers + 1)
        last_positions=np.int32(LAST_POSITIONS),
    )
    sys.stdout.write(f"{path.name} ({path.stat().st_size} bytes), gemma4_encode.npz: hidden states {hidden.shape}\n")
    return encoded


def record_embeddings_processor(out: Path, encoded: list, gen: torch.Generator) -> None:
    text_encoder, transformer = out / "gemma4_text_encoder.safetensors", out / "ltx25_transformer.safetensors"
    write_transformer(transformer, text_encoder, gen)
    processor = SingleGPUModelBuilder(
        model_path=(str(transformer), str(text_encoder)),
        model_class_configurator=EmbeddingsProcessorConfigurator.with_gemma_model_path(str(text_encoder)),
        model_sd_ops=EMBEDDINGS_PROCESSOR_KEY_OPS,
        registry=ModelRegistry(cache_models=False, cache_weights=False),
    ).build(device=torch.device("cpu"), dtype=torch.float32)
    with torch.no_grad():
        outputs = [processor.process_hidden_states(states, mask) for states, mask in encoded]
    np.savez_compressed(
        out / "embeddings_processor.npz",
        video=np.concatenate([o.video_encoding[:, :CONTEXT_POSITIONS].numpy() for o in outputs]),
        audio=np.concatenate([o.audio_encoding[:, :CONTEXT_POSITIONS].numpy() for o in outputs]),
        attention_mask=np.concatenate([o.attention_mask.numpy() for o in outputs]).astype(np.int32),
        context_positions=np.int32(CONTEXT_POSITIONS),
    )
    sys.stdout.write(f"{transformer.name} ({transformer.stat().st_size} bytes), embeddings_processor.npz\n")


def record_duration_head(out: Path, gen: torch.Generator) -> None:
    """The head on the recorded contexts (what the fixture keeps of them), so the test feeds the same tokens."""
    metadata = {
        "config": {
            "transformer": {"cross_attention_dim": 32, "audio_cross_attention_dim": 16},
            "duration_head": {"pooler_hidden_dim": 16, "num_queries": 2, "num_pooler_heads": 4, "mlp_hidden": 8},
        }
    }
    head = DurationHeadConfigurator.from_metadata(metadata)
    tensors = randomize(head, gen)
    head.load_state_dict(tensors)
    save_file({f"duration_head.{k}": v.contiguous() for k, v in tensors.items()},
              str(out / "duration_head.safetensors"), metadata=_json_values(metadata))  # fmt: skip
    contexts = np.load(out / "embeddings_processor.npz")
    video, audio = torch.from_numpy(contexts["video"]), torch.from_numpy(contexts["audio"])
    with torch.no_grad():
        seconds = {
            name: np.stack([head(*(t[i : i + 1] if t is not None else None for t in pair)).numpy() for i in range(3)])
            for name, pair in (("both", (video, audio)), ("video", (video, None)), ("audio", (None, audio)))
        }
    table = [(s, fps, lo, hi) for s in (0.01, 0.3, 1.0, 2.49, 5.0, 7.77, 19.99, 40.0) for fps in (24.0, 25.0, 30.0)
             for lo, hi in ((1, 20), (2, 3), (0.5, 10))]  # fmt: skip
    frames = [seconds_to_clamped_num_frames(s, frame_rate=fps, min_frames=round(lo * fps), max_frames=round(hi * fps))
              for s, fps, lo, hi in table]  # fmt: skip
    np.savez_compressed(
        out / "duration_head.npz", **{f"seconds_{k}": v[:, 0] for k, v in seconds.items()},
        table=np.array(table, np.float64), frames=np.array(frames, np.int64),
    )  # fmt: skip


VAE_WITH_ATTENTION = {
    "_class_name": "CausalVideoAutoencoder", "dims": 3, "latent_channels": 16, "out_channels": 3, "patch_size": 4,
    "decoder_base_channels": 32, "decoder_blocks": [["res_x", {"num_layers": 1}], ["attn", {}]],
    "norm_layer": "pixel_norm", "causal_decoder": False, "timestep_conditioning": False,
    "spatial_padding_mode": "reflect",
}  # fmt: skip


def record_vae_attention(out: Path, gen: torch.Generator) -> None:
    block = AttnBlock3D(16)
    block_weights = randomize(block, gen)
    block.load_state_dict(block_weights)
    decoder = VideoDecoderConfigurator.from_metadata({"config": {"vae": VAE_WITH_ATTENTION}})
    decoder_weights = randomize(decoder, gen)
    decoder.load_state_dict(decoder_weights)
    x, latent = torch.randn(2, 16, 3, 4, 6, generator=gen), torch.randn(1, 16, 2, 3, 3, generator=gen)
    with torch.no_grad():
        y, video = block(x), decoder(latent)
    np.savez_compressed(
        out / "vae_attention.npz", config=json.dumps(VAE_WITH_ATTENTION), x=x.numpy(), y=y.numpy(),
        latent=latent.numpy(), video=video.numpy(),
        **{f"block.{k}": v.numpy() for k, v in block_weights.items()},
        **{f"decoder.{k}": v.numpy() for k, v in decoder_weights.items()},
    )  # fmt: skip


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    record_embeddings_processor(out, record_gemma4(out, gen), gen)
    record_duration_head(out, gen)
    record_vae_attention(out, gen)


def differences(recorded: Path, committed: Path) -> list[str]:
    """What differs between two fixture folders: files, metadata values (JSON-decoded), tensors, arrays."""
    from safetensors import safe_open  # noqa: PLC0415

    names = sorted({p.name for p in recorded.iterdir()} | {p.name for p in committed.iterdir()})
    found = []
    for name in names:
        if not (recorded / name).is_file() or not (committed / name).is_file():
            found.append(f"{name}: only in one of the two")
        elif name.endswith(".npz"):
            new, old = np.load(recorded / name), np.load(committed / name)
            if set(new) != set(old):
                found.append(f"{name}: array names differ")
            shared = sorted(set(new) & set(old))
            found += [f"{name}: {k}: {problem}" for k in shared if (problem := _array_difference(new[k], old[k]))]
        else:
            with safe_open(recorded / name, "pt") as new, safe_open(committed / name, "pt") as old:
                meta = [{k: _decoded(v) for k, v in (f.metadata() or {}).items()} for f in (new, old)]
                if meta[0] != meta[1] or set(new.keys()) != set(old.keys()):
                    found.append(f"{name}: metadata or keys differ")
                elif any(not torch.equal(new.get_tensor(k), old.get_tensor(k)) for k in new.keys()):
                    found.append(f"{name}: tensors differ")
    return found


def _array_difference(new: np.ndarray, old: np.ndarray) -> str | None:
    """Why a recorded array is not the committed one, or None. Integers, masks and shapes are equal exactly;
    floats within RECORDED_FIXTURE of the array's largest magnitude, since another CPU's kernels round
    differently (last-bit differences between two x86 machines, same torch: tolerances.py has the numbers)."""
    if new.shape != old.shape or new.dtype != old.dtype:
        return f"shape or dtype {new.shape} {new.dtype} against {old.shape} {old.dtype}"
    if new.dtype.kind != "f":
        return None if np.array_equal(new, old) else "values differ"
    scale = max(float(np.abs(old).max(initial=0.0)), np.finfo(old.dtype).tiny)
    worst = float(np.abs(new.astype(np.float64) - old).max(initial=0.0)) / scale
    return None if worst <= RECORDED_FIXTURE else f"relative difference {worst:.2e} > {RECORDED_FIXTURE:.0e}"


def _decoded(value: str) -> object:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def recorder_command(description: str, record: Callable[[Path], None], fixtures: Path) -> None:
    """A recording script's command line: `record(fixtures)`, or with `--check` record into a temporary folder and
    compare (exit 1 on a difference)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="record into a temporary folder and compare")
    if not parser.parse_args().check:
        record(fixtures)
        return
    with tempfile.TemporaryDirectory() as tmp:
        record(Path(tmp))
        found = differences(Path(tmp), fixtures)
    matched = f"a new recording matches the committed fixtures (floats within {RECORDED_FIXTURE:.0e})"
    sys.stdout.write("\n".join(found or [matched]) + "\n")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    recorder_command(__doc__.split("\n", 1)[0], record, FIXTURES)
