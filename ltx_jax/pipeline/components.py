"""The models a generation uses, built from a checkpoint or as the embedded tiny default.

Both paths go through the same configurators: the embedded default (`embedded.py`) is a checkpoint
`config` dict with random weights, so `python scripts/generate.py` exercises the code a real
checkpoint runs. Decoders run after the DiT has finished, on process 0: jitted on one device, or a
checkpoint's video in tiles spread over the process's devices of the mesh.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.config import LTXConfig
from ltx_jax.convert.checkpoint import load_checkpoint
from ltx_jax.convert.dit_tensors import Lora, checkpoint_config
from ltx_jax.convert.safetensors_file import LazyTensor, SafetensorsFile, lazy_tensors, parse_metadata_json
from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model import audio_vae, upsampler, video_vae
from ltx_jax.model.model import LTXModel
from ltx_jax.pipeline.images import load_image_conditioning
from ltx_jax.pipeline.media_io import video_to_uint8
from ltx_jax.pipeline.pipelines import Components
from ltx_jax.pipeline.stages import LatentGeometry, PromptEmbeddings

CHECKPOINT_DEFAULTS = {"height": 512, "width": 768, "num_frames": 121}


@dataclasses.dataclass
class Assembly:
    """Everything `generate_cli.run` needs besides the mesh."""

    model: LTXModel
    stage_2_model: LTXModel | None
    components: Components
    decode_video: Callable[[jax.Array], np.ndarray]  # latent -> (F, H, W, 3) uint8
    decode_audio: Callable[[jax.Array], tuple[np.ndarray, int]]  # latent -> waveform (2, N), Hz
    encode_prompt: Callable[[str], PromptEmbeddings] | None
    defaults: dict[str, Any]
    description: str


def checkpoint_tensors(path: Path) -> tuple[dict[str, LazyTensor], dict[str, Any]]:
    """A safetensors file's tensors (read on use) and its parsed `config` metadata."""
    file = SafetensorsFile(path)
    config = parse_metadata_json(file.metadata, "config") if "config" in file.metadata else {}
    return lazy_tensors(file), config


def build(args: argparse.Namespace, mesh: Mesh) -> Assembly:
    if args.checkpoint_path is None:
        from ltx_jax.pipeline.embedded import embedded  # noqa: PLC0415 - embedded.py builds on this module

        return embedded(args, mesh)
    return from_checkpoint(args, mesh)


def jitted(module: nnx.Module, method: Callable[..., Any]) -> Callable[..., Any]:
    """`method(module, *args)` under `jax.jit` over the module's state (no per-call graph walk)."""
    graphdef, state = nnx.split(module)
    compiled = jax.jit(lambda state, *args: method(nnx.merge(graphdef, state), *args))
    return lambda *args: compiled(state, *args)


def decoder_modules(
    config: dict[str, Any], tensors: dict[str, Any] | None, seed: int, dtype: jnp.dtype
) -> tuple[nnx.Module, nnx.Module, nnx.Module]:
    """Video decoder, audio decoder, vocoder: random weights when `tensors` is None, else loaded."""
    builders = (  # each with its own Rngs: nnx.eval_shape may not advance one made outside it
        lambda: video_vae.video_decoder_from_config(config, rngs=nnx.Rngs(seed), param_dtype=dtype),
        lambda: audio_vae.audio_decoder_from_config(config, rngs=nnx.Rngs(seed + 1)),
        lambda: audio_vae.vocoder_from_config(config, rngs=nnx.Rngs(seed + 2)),
    )
    if tensors is None:
        return tuple(build() for build in builders)
    # Abstract modules filled by the strict loader: no random init of real-size weights.
    video_decoder, audio_decoder, vocoder = (nnx.eval_shape(build) for build in builders)
    load_state_dict(video_decoder, video_vae.vae_decoder_state_dict(tensors), prefix="")
    load_state_dict(audio_decoder, audio_vae.audio_decoder_state_dict(tensors), prefix="")
    load_state_dict(vocoder, audio_vae.vocoder_state_dict(tensors), prefix="")
    return video_decoder, audio_decoder, vocoder


def decoder_callables(
    video_decoder: nnx.Module,
    audio_decoder: nnx.Module,
    vocoder: nnx.Module,
    seed: int,
    mesh: Mesh | None = None,
) -> tuple[Callable[[jax.Array], np.ndarray], Callable[[jax.Array], tuple[np.ndarray, int]]]:
    """latent -> (F, H, W, 3) uint8 frames; audio latent -> ((2, samples) waveform, sample rate).

    With a `mesh`, the video is decoded in the reference's tiles (768 px overlapping by 64, 80 frames
    overlapping by 24), spread over this process's devices of the mesh; without, in one pass.
    """
    decode = jitted(video_decoder, lambda m, latent, key: m(latent, key=key))
    decode_waveform = nnx.jit(audio_vae.decode_audio)  # runs once per generation: nnx.jit's overhead is moot

    def decode_video(latent: jax.Array) -> np.ndarray:
        key = jax.random.key(seed)
        if mesh is None:
            return video_to_uint8(np.asarray(decode(latent, key), np.float32)[0])
        tiling, devices = video_vae.TileSizeConfig.default(), list(mesh.local_devices)
        video = video_vae.decode_video(video_decoder, latent, tiling, key=key, devices=devices)
        return video_to_uint8(np.asarray(video, np.float32)[0])

    def decode_audio(latent: jax.Array) -> tuple[np.ndarray, int]:
        audio = decode_waveform(latent[:1].astype(jnp.float32), audio_decoder, vocoder)
        return np.asarray(audio.waveform, np.float32), audio.sampling_rate

    return decode_video, decode_audio


def geometry(config: dict[str, Any]) -> LatentGeometry:
    """Latent sizes from the checkpoint config: the VAE's channels; audio channels and mel bins whose
    product is the DiT's audio width."""
    audio = config["audio_vae"]["model"]["params"]["ddconfig"]
    z_channels = audio.get("z_channels", 8)
    return LatentGeometry(
        config["vae"].get("latent_channels", 128),
        z_channels,
        config["transformer"].get("audio_in_channels", 128) // z_channels,
    )


def image_encoder(encoder: nnx.Module, dtype: jnp.dtype) -> Callable[[Any, int, int], jax.Array]:
    encode = jitted(encoder, lambda m, image: m(image))

    def encode_image(path: Any, height: int, width: int) -> jax.Array:  # noqa: ANN401 - str or PathLike
        return encode(jnp.asarray(load_image_conditioning(path, height, width), dtype))

    return encode_image


def model_config(args: argparse.Namespace) -> LTXConfig:
    """The DiT's config from the checkpoint's header (or the embedded default's), without loading weights."""
    if args.checkpoint_path is None:
        from ltx_jax.pipeline.embedded import EMBEDDED_CONFIG  # noqa: PLC0415 - embedded.py builds on this module

        return LTXConfig.from_metadata(EMBEDDED_CONFIG)
    if not str(args.checkpoint_path).endswith(".safetensors") or not Path(args.checkpoint_path).is_file():
        raise ValueError(
            f"--checkpoint-path {args.checkpoint_path} must be an official LTX-2 .safetensors file (it also holds "
            "the VAEs and the vocoder the pipeline decodes with)."
        )
    cfg, _ = checkpoint_config(SafetensorsFile(args.checkpoint_path), None)
    return cfg


def from_checkpoint(args: argparse.Namespace, mesh: Mesh) -> Assembly:
    model_config(args)  # the same file checks as the preflight
    tensors, config = checkpoint_tensors(args.checkpoint_path)
    dtype = jnp.dtype(args.dtype)
    # --shard-weights: the DiT's large matrices are split over the mesh (each process reads only its
    # slices of the file) and gathered per layer inside the forward, instead of a copy per device.
    load = functools.partial(
        load_checkpoint, args.checkpoint_path, mesh=mesh, dtype=dtype, shard_weights=args.shard_weights
    )
    model, cfg = load()
    stage_2 = None
    if args.pipeline == "two-stage":
        if not args.distilled_lora:
            raise ValueError("--pipeline two-stage needs --distilled-lora PATH [STRENGTH] for its second stage.")
        path, strength = args.distilled_lora[0], float(args.distilled_lora[1]) if len(args.distilled_lora) > 1 else 1.0
        stage_2, _ = load(loras=[Lora(path, strength)])
    video_decoder, audio_decoder, vocoder = decoder_modules(config, tensors, args.seed, dtype)
    decode_video, decode_audio = decoder_callables(video_decoder, audio_decoder, vocoder, args.seed, mesh)
    encode_image = None
    if args.image:
        encoder = nnx.eval_shape(
            lambda: video_vae.video_encoder_from_config(config, rngs=nnx.Rngs(0), param_dtype=dtype)
        )
        load_state_dict(encoder, video_vae.vae_encoder_state_dict(tensors), prefix="")
        encode_image = image_encoder(encoder, dtype)
    parts = Components(
        transformer=model,
        geometry=geometry(config),
        dtype=dtype,
        upsample=_checkpoint_upsampler(args, video_decoder, dtype),
        encode_image=encode_image,
    )
    version = str(config.get("model_version", config.get("transformer", {}).get("model_version", "")))
    is_2_3 = version.startswith("2.3") or cfg.apply_gated_attention
    defaults = {
        **CHECKPOINT_DEFAULTS,
        "num_inference_steps": 30 if is_2_3 else 40,
        "stg_blocks": (28,) if is_2_3 else (29,),
    }
    encode_prompt = None if args.gemma_root is None else _gemma_prompt_encoder(args, config, tensors, mesh)
    return Assembly(
        model, stage_2, parts, decode_video, decode_audio, encode_prompt, defaults, str(args.checkpoint_path)
    )


def _gemma_prompt_encoder(
    args: argparse.Namespace, config: dict[str, Any], tensors: dict[str, Any], mesh: Mesh
) -> Callable[[str], PromptEmbeddings]:
    """Gemma 3 from --gemma-root (weights split over the mesh) + the checkpoint's embeddings processor."""
    from ltx_jax.text_encoders.gemma import build_prompt_encoder  # noqa: PLC0415 - only with --gemma-root

    encoder = build_prompt_encoder(
        args.gemma_root,
        config,
        tensors,
        mesh=mesh if mesh.size > 1 else None,
        # Cache hits are per process: with several processes one could skip a Gemma forward whose weights
        # span all of them and hang the others, so the cache is used only in single-process runs.
        cache_dir=args.prompt_cache_dir if jax.process_count() == 1 else None,
        ltx_checkpoint_path=args.checkpoint_path,
    )

    def encode(text: str) -> PromptEmbeddings:
        out = encoder.encode_prompt(text)
        return PromptEmbeddings(out.video_encoding, out.audio_encoding)

    return encode


def _checkpoint_upsampler(args: argparse.Namespace, video_decoder: nnx.Module, dtype: jnp.dtype) -> Callable | None:
    if args.spatial_upsampler_path is None:
        if args.pipeline != "one-stage":
            raise ValueError(f"--pipeline {args.pipeline} needs --spatial-upsampler-path (the 2x latent upsampler).")
        return None
    tensors, config = checkpoint_tensors(args.spatial_upsampler_path)
    model = nnx.eval_shape(
        lambda: upsampler.LatentUpsamplerConfigurator.from_config(config, rngs=nnx.Rngs(0), param_dtype=dtype)
    )
    load_state_dict(model, tensors, prefix="")
    return upsample_between_statistics(model, video_decoder)


def upsample_between_statistics(model: nnx.Module, video_decoder: nnx.Module) -> Callable[[jax.Array], jax.Array]:
    """The upsampler between the VAE's per-channel statistics (un-normalize, upsample, normalize)."""
    statistics = video_decoder.per_channel_statistics
    mean, std = (getattr(statistics, name)[...] for name in ("mean-of-means", "std-of-means"))
    return jitted(model, lambda m, latent: upsampler.upsample_video(latent, m, mean, std))
