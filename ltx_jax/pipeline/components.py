"""The models a generation uses and the pieces both sources build them from.

A checkpoint (`model_ledger.py`) and the embedded tiny default (`embedded.py`) go through the same
configurators and the same builders here, so `python scripts/generate.py` exercises the code a real
checkpoint runs. Decoders run after the DiT has finished: jitted on one device, or a checkpoint's
video in tiles spread over the process's devices of the mesh.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model import audio_vae, upsampler, video_vae
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF, load_image_conditioning
from ltx_jax.pipeline.media_io import video_to_uint8
from ltx_jax.pipeline.requests import Components
from ltx_jax.pipeline.settings import GenerationDefaults
from ltx_jax.pipeline.stages import LatentGeometry, PromptEmbeddings
from ltx_jax.pipeline.video_files import load_video_conditioning
from ltx_jax.text_encoders.gemma import PromptEncoder

VideoDecoder = Callable[[jax.Array, int], np.ndarray]  # (latent, seed) -> (F, H, W, 3) uint8
AudioDecoder = Callable[[jax.Array], tuple[np.ndarray, int]]  # latent -> ((2, samples) waveform, Hz)
AudioEncoder = Callable[[np.ndarray, int], jax.Array]  # ((channels, samples) waveform, Hz) -> latent (1, C, T, M)


@dataclasses.dataclass(frozen=True)
class PipelineModels:
    """Everything a pipeline calls, built once.

    Attributes:
        components: what the flows call; its `transformer` (and `stage_2_transformer`, the DiT with
            the distilled LoRA fused) are the `LTXModel`s, which the pipeline runs on its mesh.
        decode_video: `(latent, seed)` -> `(F, H, W, 3)` uint8 frames.
        decode_audio: audio latent -> `((2, samples) float32 waveform, sample rate)`.
        prompt_encoder: text -> contexts (None: the caller passes `PromptEmbeddings`).
        defaults: what a generation uses for the arguments the caller leaves out.
        description: what the weights are, for summaries.
    """

    components: Components
    decode_video: VideoDecoder
    decode_audio: AudioDecoder
    prompt_encoder: PromptEncoder | None
    defaults: GenerationDefaults
    description: str


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
    video_decoder: nnx.Module, audio_decoder: nnx.Module, vocoder: nnx.Module, mesh: Mesh | None = None
) -> tuple[VideoDecoder, AudioDecoder]:
    """The video and audio decoders as `PipelineModels` calls them, compiled once per latent shape.

    With a `mesh`, the video is decoded in the reference's tiles (768 px overlapping by 64, 80 frames
    overlapping by 24), spread over this process's devices of the mesh; without, in one pass.
    """
    decode = jitted(video_decoder, lambda m, latent, key: m(latent, key=key))
    # jitted over the parameters: nnx.jit walked the vocoder's module graph on every call (about 0.2-0.5 s of
    # a ~2 s decode of the --tiny synthetic model on a 2-core CPU)
    decode_waveform = jitted(nnx.List([audio_decoder, vocoder]), lambda m, latent: audio_vae.decode_audio(latent, *m))

    def decode_video(latent: jax.Array, seed: int) -> np.ndarray:
        key = jax.random.key(seed)
        if mesh is None:
            return video_to_uint8(np.asarray(decode(latent, key), np.float32)[0])
        tiling, devices = video_vae.TileSizeConfig.default(), list(mesh.local_devices)
        video = video_vae.decode_video(video_decoder, latent, tiling, key=key, devices=devices)
        return video_to_uint8(np.asarray(video, np.float32)[0])

    def decode_audio(latent: jax.Array) -> tuple[np.ndarray, int]:
        audio = decode_waveform(latent[:1].astype(jnp.float32))
        return np.asarray(audio.waveform, np.float32), vocoder.output_sampling_rate

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


def conditioning_encoders(
    build_encoder: Callable[[], nnx.Module], dtype: jnp.dtype
) -> dict[str, Callable[[str | os.PathLike, int, int, int], jax.Array]]:
    """`Components.encode_image` `(image file, height, width, crf)` and `encode_video` `(video file,
    height, width, frames)`: their latents. The video VAE encoder is built by `build_encoder` on the
    first use (most videos have no conditioning), once for both."""

    @functools.cache
    def encode() -> Callable[[jax.Array], jax.Array]:
        return jitted(build_encoder(), lambda m, pixels: m(pixels))

    def encode_image(path: str | os.PathLike, height: int, width: int, crf: int = DEFAULT_IMAGE_CRF) -> jax.Array:
        return encode()(jnp.asarray(load_image_conditioning(path, height, width, crf), dtype))

    def encode_video(path: str | os.PathLike, height: int, width: int, frames: int) -> jax.Array:
        return encode()(jnp.asarray(load_video_conditioning(path, height, width, frames), dtype))

    return {"encode_image": encode_image, "encode_video": encode_video}


def audio_encoder_callable(build_encoder: Callable[[], nnx.Module], dtype: jnp.dtype) -> AudioEncoder:
    """`Components.encode_audio`: ltx-core's `encode_audio` (resampling and the log-mel spectrogram in
    numpy on the host, then the audio VAE encoder, jitted, in `dtype`). The encoder is built by
    `build_encoder` on the first use (only a2vid and retake encode audio)."""

    @functools.cache
    def built() -> tuple[audio_vae.AudioProcessor, Callable[[jax.Array], jax.Array], int]:
        encoder = build_encoder()
        processor = audio_vae.AudioProcessor(
            encoder.sample_rate, encoder.mel_bins, encoder.mel_hop_length, encoder.n_fft
        )
        return processor, jitted(encoder, lambda m, mel: m(mel)), encoder.in_channels

    def encode_audio(waveform: np.ndarray, sample_rate: int) -> jax.Array:
        processor, encode, channels = built()
        waveform = np.asarray(waveform, np.float32)
        if waveform.shape[0] == 1 < channels:  # mono: the same signal on both channels (ltx-core fails on it)
            waveform = np.repeat(waveform, channels, axis=0)
        return encode(jnp.asarray(processor.waveform_to_mel(waveform[None], sample_rate), dtype))

    return encode_audio


def upsample_between_statistics(model: nnx.Module, video_decoder: nnx.Module) -> Callable[[jax.Array], jax.Array]:
    """The upsampler between the VAE's per-channel statistics (un-normalize, upsample, normalize)."""
    statistics = video_decoder.per_channel_statistics
    mean, std = (getattr(statistics, name)[...] for name in ("mean-of-means", "std-of-means"))
    return jitted(model, lambda m, latent: upsampler.upsample_video(latent, m, mean, std))


def encode_texts(encoder: PromptEncoder, texts: Sequence[str]) -> list[PromptEmbeddings]:
    """Each text's video and audio contexts, all texts in one Gemma forward."""
    return [PromptEmbeddings(out.video_encoding, out.audio_encoding) for out in encoder.encode_prompts(list(texts))]
