"""The models a generation uses and the pieces both sources build them from.

A checkpoint (`model_ledger.py`) and the embedded tiny default (`embedded.py`) go through the same
configurators and the same builders here, so `python scripts/generate.py` exercises the code a real
checkpoint runs. The decoders as the pipeline calls them are in `decoders.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model import audio_vae, upsampler, video_vae
from ltx_jax.model.abstract import abstract_module
from ltx_jax.pipeline.duration import DurationPredictor
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF, load_image_conditioning
from ltx_jax.pipeline.requests import Components
from ltx_jax.pipeline.settings import GenerationDefaults
from ltx_jax.pipeline.stages import LatentGeometry, PromptEmbeddings
from ltx_jax.pipeline.video_files import load_video_conditioning
from ltx_jax.text_encoders.gemma import PromptEncoder


class VideoDecoder(Protocol):
    """`(latent, seed)` -> `(F, H, W, 3)` uint8 frames (`decoders.VideoDecoding`)."""

    def __call__(self, latent: jax.Array, seed: int) -> np.ndarray: ...

    def compile_ahead(self, shape: tuple[int, ...], dtype: jnp.dtype) -> None:
        """Compiles decoding a `shape` latent of `dtype`, without running it."""


class AudioDecoder(Protocol):
    """latent -> `((2, samples) float32 waveform, sample rate)` (`decoders.AudioDecoding`)."""

    def __call__(self, latent: jax.Array) -> tuple[np.ndarray, int]: ...

    def compile_ahead(self, shape: tuple[int, ...]) -> None:
        """Compiles decoding a `shape` latent, without running it."""


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
        model_version: the transformer file's `model_version`, parsed (() unknown, the embedded model).
        duration: LTX-2.5's duration head (`--duration-head-path`): frames from a prompt's contexts; None without.
    """

    components: Components
    decode_video: VideoDecoder
    decode_audio: AudioDecoder
    prompt_encoder: PromptEncoder | None
    defaults: GenerationDefaults
    description: str
    model_version: tuple[int, ...] = ()
    duration: DurationPredictor | None = None


class JittedModule:
    """`method(module, *args)` under `jax.jit` over the module's state (no per-call graph walk), its
    program named `name` (in compile logs and profiles)."""

    def __init__(self, module: nnx.Module, method: Callable[..., Any], name: str) -> None:
        graphdef, self.state = nnx.split(module)

        def call(state: nnx.State, *args: Any) -> Any:
            return method(nnx.merge(graphdef, state), *args)

        call.__name__ = call.__qualname__ = name
        self._jit = jax.jit(call)

    def __call__(self, *args: Any) -> Any:
        return self._jit(self.state, *args)

    def compile(self, *args: Any) -> None:
        """Compiles the call with `args` (arrays or `jax.ShapeDtypeStruct`s) without running it; a call
        with arguments of the same shapes, dtypes and placements then finds it compiled."""
        self._jit.lower(self.state, *args).compile()

    def shape(self, *args: Any) -> Any:
        """The result's shapes and dtypes (`jax.ShapeDtypeStruct`s) for `args`, traced, not compiled."""
        return jax.eval_shape(self._jit, self.state, *args)


def decoder_modules(
    config: dict[str, Any], tensors: dict[str, Any] | None, seed: int, dtype: jnp.dtype, *, video: bool = True
) -> tuple[nnx.Module | None, nnx.Module, nnx.Module]:
    """Video decoder, audio decoder, vocoder: random weights when `tensors` is None, else loaded. The video decoder
    is LTX-2.5's diffusion decoder where the config's `vae._class_name` is "CausalDiffusionVAE" (as 1.2.0's
    `VideoDecoderConfigurator` chooses), else the convolutional one; None without `video` (an audio-only flow,
    which needs no video VAE file)."""
    diffusion = video_vae.is_diffusion_vae(config)
    video_builder = video_vae.diffusion_video_decoder_from_config if diffusion else video_vae.video_decoder_from_config
    builders = (
        lambda rngs: video_builder(config, rngs=rngs, param_dtype=dtype),
        lambda rngs: audio_vae.audio_decoder_from_config(config, rngs=rngs),
        lambda rngs: audio_vae.vocoder_from_config(config, rngs=rngs),
    )
    if tensors is None:
        return tuple(build(nnx.Rngs(seed + i)) if video or i else None for i, build in enumerate(builders))
    # Abstract modules filled by the strict loader: no random init of real-size weights.
    video_decoder, audio_decoder, vocoder = (abstract_module(b) if video or i else None for i, b in enumerate(builders))
    select = video_vae.diffusion_vae_decoder_state_dict if diffusion else video_vae.vae_decoder_state_dict
    if video:
        load_state_dict(video_decoder, select(tensors), prefix="")
    load_state_dict(audio_decoder, audio_vae.audio_decoder_state_dict(tensors), prefix="")
    load_state_dict(vocoder, audio_vae.vocoder_state_dict(tensors), prefix="")
    return video_decoder, audio_decoder, vocoder


def geometry(config: dict[str, Any]) -> LatentGeometry:
    """Latent sizes from the checkpoint config: the VAE's channels; audio channels and mel bins whose
    product is the DiT's audio width."""
    audio = config["audio_vae"]["model"]["params"]["ddconfig"]
    z_channels = audio.get("z_channels", 8)
    return LatentGeometry(
        video_vae.video_latent_channels(config),
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
        return JittedModule(build_encoder(), lambda m, pixels: m(pixels), "encode_video")

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
        return processor, JittedModule(encoder, lambda m, mel: m(mel), "encode_audio"), encoder.in_channels

    def encode_audio(waveform: np.ndarray, sample_rate: int) -> jax.Array:
        processor, encode, channels = built()
        waveform = np.asarray(waveform, np.float32)
        if waveform.shape[0] == 1 < channels:  # mono: the same signal on both channels (ltx-core fails on it)
            waveform = np.repeat(waveform, channels, axis=0)
        return encode(jnp.asarray(processor.waveform_to_mel(waveform[None], sample_rate), dtype))

    return encode_audio


class Upsampling:
    """The x2 latent upsampler between the VAE's per-channel statistics (un-normalize, upsample,
    normalize): `Components.upsample`, run on the device holding its parameters, compilable ahead."""

    def __init__(self, model: nnx.Module, video_decoder: nnx.Module) -> None:
        statistics = video_decoder.per_channel_statistics
        mean, std = (getattr(statistics, name)[...] for name in ("mean-of-means", "std-of-means"))
        upsample = functools.partial(upsampler.upsample_video, mean=mean, std=std)
        self._upsample = JittedModule(model, lambda m, latent: upsample(latent, m), "upsample")
        self.device = next(iter(jax.tree.leaves(self._upsample.state)[0].devices()))

    def __call__(self, latent: jax.Array) -> jax.Array:
        return self._upsample(jax.device_put(latent, self.device))

    def compile_ahead(self, shape: tuple[int, ...], dtype: jnp.dtype) -> None:
        """Compiles upsampling a `shape` latent of `dtype`, without running it (see `decoders.py`)."""
        placed = jax.sharding.SingleDeviceSharding(self.device)
        self._upsample.compile(jax.ShapeDtypeStruct(shape, dtype, sharding=placed))


def encode_texts(encoder: PromptEncoder, texts: Sequence[str]) -> list[PromptEmbeddings]:
    """Each text's video and audio contexts, all texts in one Gemma forward."""
    return [PromptEmbeddings(out.video_encoding, out.audio_encoding) for out in encoder.encode_prompts(list(texts))]
