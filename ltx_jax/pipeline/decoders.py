"""The video and audio decoders as a pipeline calls them, and their compilation ahead of the latents.

On an H200 with an empty compilation cache, compiling the decoders of a 1536x1024x121 video took about
22 s (the video VAE, in tiles) and 17 s (the audio VAE and vocoder), after denoising, while the video
waited for them. Their input shapes follow from the request alone, so `LTXPipeline` has them, the
upsampler (`components.Upsampling`) and the later stages' DiT compiled on background threads
(`compile_after_stage_1`) while stage 1 denoises: the host is mostly idle then, the device runs the
steps. `jax.jit(...).lower(...).compile()` fills the in-memory cache a later call uses when the call's
arguments have the same shapes, dtypes and placements; that is why every input is put on its model's
device explicitly (committed) before a call, as the ahead-of-time shapes say.

LTX-2.5's diffusion decoder (a CausalDiffusionVAE file) is called through `DiffusionVideoDecoding`, the same seam:
always in tiles (given, or sized per video as ltx-pipelines' AUTO_TILING sizes them from free memory), spread
over the same devices, its stage-5 noise drawn from the seed for the whole video.

Frames are converted to uint8 on the device (the reference's `((x + 1) / 2).clamp(0, 1) * 255`, then
truncated), so 1 byte per value crosses to the host instead of 4, and no full-size float32 copy of the
video is made on the host.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model import audio_vae, video_vae
from ltx_jax.model.video_vae import diffusion_tiled_decode
from ltx_jax.pipeline.components import JittedModule, Upsampling
from ltx_jax.pipeline.flows import Flow, Plan
from ltx_jax.pipeline.pipelines import final_latent_shapes, later_first_forwards, stage_pixels, stage_transformer
from ltx_jax.pipeline.requests import Components, Request

_LOG = logging.getLogger(__name__)


@jax.jit
def frames_uint8(video: jax.Array) -> jax.Array:
    """A decoded `(1, 3, F, H, W)` video in [-1, 1] -> `(F, H, W, 3)` uint8, as `media_io.video_to_uint8`."""
    scaled = jnp.clip((video[0].astype(jnp.float32) + 1.0) / 2.0, 0.0, 1.0) * 255.0
    return jnp.moveaxis(scaled, 0, -1).astype(jnp.uint8)


class VideoDecoding:
    """`(latent, seed)` -> `(F, H, W, 3)` uint8 frames. With `devices`, the latent is decoded in
    `tiling`'s tiles (the reference's by default: 768 px overlapping by 64, 80 frames overlapping by 24)
    spread over them; without, in one pass on the first local device."""

    def __init__(
        self,
        decoder: video_vae.VideoDecoder,
        devices: list[jax.Device] | None = None,
        tiling: video_vae.TileSizeConfig | None = None,
    ) -> None:
        self.decoder, self.devices = decoder, devices
        self.tiling = tiling or video_vae.TileSizeConfig.default()
        self.device = devices[0] if devices else jax.local_devices()[0]
        self._placed = jax.sharding.SingleDeviceSharding(self.device)
        self._whole = JittedModule(decoder, lambda m, latent, key: m(latent, key=key), "decode_video")

    def __call__(self, latent: jax.Array, seed: int) -> np.ndarray:
        chunks = [np.asarray(chunk) for chunk in self.chunks(latent, seed)]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def chunks(self, latent: jax.Array, seed: int) -> list[jax.Array]:
        """The frames as `(n, H, W, 3)` uint8 arrays on the device, in order: one per temporal group of
        tiles (one in all without `devices`), every one dispatched and already being copied to the host,
        so that the first can be encoded while the device decodes the next."""
        latent, key = jax.device_put((latent, jax.random.key(seed)), self.device)
        if self.devices is None:
            videos = [self._whole(latent, key)]
        else:
            videos = self.decoder.tiled_decode(latent, self.tiling, key=key, devices=self.devices)
        frames = [frames_uint8(video) for video in videos]
        for chunk in frames:
            chunk.copy_to_host_async()
        return frames

    def compile_ahead(self, shape: tuple[int, ...], dtype: jnp.dtype) -> None:
        """Compiles what decoding a `shape` latent of `dtype` runs, without running it."""
        latent = jax.ShapeDtypeStruct(shape, dtype, sharding=self._placed)
        key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=self._placed)
        video = self._whole.shape(latent, key)  # a chunk is a slice of it along time, in the latent's dtype
        if self.devices is None:
            self._whole.compile(latent, key)
            chunks = {(video.shape[2], video.dtype)}
        else:
            self.decoder.compile_tiles(latent, self.tiling, self.devices)
            chunks = {(frames, dtype) for frames in self.decoder.tiled_chunk_frames(shape, self.tiling)}
        for frames, chunk_dtype in chunks:
            chunk = (*video.shape[:2], frames, *video.shape[3:])
            frames_uint8.lower(jax.ShapeDtypeStruct(chunk, chunk_dtype, sharding=self._placed)).compile()


class DiffusionVideoDecoding:
    """`(latent, seed)` -> `(F, H, W, 3)` uint8 frames from LTX-2.5's diffusion decoder, in tiles spread round-robin
    over `devices` (none: the first local device), blended on the first; the seed's key draws the stage-5 noise for
    the whole video once, so a seed gives the same video on any devices. `tiling` (a `TileSizeConfig`) fixes the
    tiles; None: per latent shape, the sizes ltx-pipelines' AUTO_TILING picks (`video_vae.recommended_tiling`) from
    the first device's free memory when first needed (while stage 1 runs, as the decoder compiles ahead: the DiT's
    weights and activations count as used; a CPU device, which reports none, has the host's available memory)."""

    def __init__(
        self,
        decoder: video_vae.DiffusionVideoDecoder,
        devices: list[jax.Device] | None = None,
        tiling: video_vae.TileSizeConfig | None = None,
    ) -> None:
        if tiling is not None:
            video_vae.check_tiling(tiling, video_vae.TileGeometry.of(decoder.config), "video_decode_tiling")
        self.decoder, self.tiling = decoder, tiling
        self.devices = list(devices) if devices else jax.local_devices()[:1]
        self.device = self.devices[0]
        self._placed = jax.sharding.SingleDeviceSharding(self.device)
        self._chosen: dict[tuple[int, ...], video_vae.TileSizeConfig] = {}

    def __call__(self, latent: jax.Array, seed: int) -> np.ndarray:
        chunks = [np.asarray(chunk) for chunk in self.chunks(latent, seed)]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def tiling_for(self, shape: tuple[int, ...]) -> video_vae.TileSizeConfig:
        """The tiles a `shape` latent decodes in: `tiling`, or the recommended sizes, chosen once per shape."""
        if self.tiling is not None:
            return self.tiling
        if tuple(shape) not in self._chosen:
            free = free_bytes(self.device)
            frames, height, width = (shape[2] - 1) * 8 + 1, shape[3] * 32, shape[4] * 32  # the video asked for
            model = 2 * sum(x.size for x in jax.tree.leaves(nnx.state(self.decoder, nnx.Param)))  # as bf16
            tiling = video_vae.recommended_tiling(
                self.decoder.config, frames=frames, height=height, width=width, free_bytes=free, model_bytes=model
            )
            _LOG.info("diffusion decoder tiles for a %s latent, %d bytes free: %s", shape, free, tiling)
            self._chosen[tuple(shape)] = tiling
        return self._chosen[tuple(shape)]

    def chunks(self, latent: jax.Array, seed: int) -> list[jax.Array]:
        """As `VideoDecoding.chunks`: one `(n, H, W, 3)` uint8 chunk per temporal group of tiles, in order."""
        latent, key = jax.device_put((latent, jax.random.key(seed)), self.device)
        tiling = self.tiling_for(latent.shape)
        videos = diffusion_tiled_decode.tiled_decode(self.decoder, latent, tiling, key=key, devices=self.devices)
        frames = [frames_uint8(video) for video in videos]
        for chunk in frames:
            chunk.copy_to_host_async()
        return frames

    def compile_ahead(self, shape: tuple[int, ...], dtype: jnp.dtype) -> None:
        """Compiles stages 1-3, the tiles and the uint8 conversion of each chunk for a `shape` latent of `dtype`."""
        tiling = self.tiling_for(shape)
        latent = jax.ShapeDtypeStruct(shape, dtype, sharding=self._placed)
        diffusion_tiled_decode.compile_tiles(self.decoder, latent, tiling, self.devices)
        for frames in set(diffusion_tiled_decode.tiled_chunk_frames(self.decoder, shape, tiling)):
            chunk = (shape[0], self.decoder.config.out_channels, frames, shape[3] * 32, shape[4] * 32)
            frames_uint8.lower(jax.ShapeDtypeStruct(chunk, dtype, sharding=self._placed)).compile()


def free_bytes(device: jax.Device) -> int:
    """Bytes free on `device`: `bytes_limit - bytes_in_use` of its memory stats; a device that reports none (the
    CPU) has the host's available physical memory."""
    stats = device.memory_stats()
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


class AudioDecoding:
    """Audio latent `(B, C, T, M)` -> `((2, samples) float32 waveform, sample rate)`: the first item of
    the batch through the audio VAE decoder and the vocoder, on `device`."""

    def __init__(self, audio_decoder: nnx.Module, vocoder: nnx.Module, device: jax.Device) -> None:
        self.device, self.sample_rate = device, vocoder.output_sampling_rate
        self._placed = jax.sharding.SingleDeviceSharding(device)
        # jitted over the parameters: nnx.jit walked the vocoder's module graph on every call (about 0.2-0.5 s
        # of a ~2 s decode of the --tiny synthetic model on a 2-core CPU)
        self._decode = JittedModule(
            nnx.List([audio_decoder, vocoder]),
            lambda m, latent: audio_vae.decode_audio(latent, *m).waveform,
            "decode_audio",
        )

    def __call__(self, latent: jax.Array) -> tuple[np.ndarray, int]:
        return np.asarray(self.waveform(latent), np.float32), self.sample_rate

    def waveform(self, latent: jax.Array) -> jax.Array:
        """The `(2, samples)` waveform on the device, dispatched and not waited for."""
        return self._decode(jax.device_put(latent[:1].astype(jnp.float32), self.device))

    def compile_ahead(self, shape: tuple[int, ...]) -> None:
        """Compiles decoding a `shape` latent, without running it."""
        self._decode.compile(jax.ShapeDtypeStruct((1, *shape[1:]), jnp.float32, sharding=self._placed))


class BackgroundCompiler:
    """Runs sequences of compilations on background threads (`threads` at once, each sequence in its
    order); `wait` before what they compile runs.

    They start with the denoising, alongside the DiT's own first compilation: starting them after the
    DiT's first forward instead left them unfinished when decoding began (13 s more of decoding in a
    cold two-stage run on an H200, benchmarks/results/2026-12-02/README.md, "Third round"). Two
    threads: with stage 2's programs and the decoders all on one, the decoders were not ready when
    decoding began (18.5 s of video decoding, 2026-12-03 "Fourth round");
    a third one (the audio decoder on its own) slowed the cold stage 1 by 11 s, as its autotuning
    shares the GPU with the denoising. A compilation that fails here is only logged: the model
    compiles the program again when called, and reports a real error there. `cancel` skips what has
    not started; one compilation in progress cannot be interrupted (XLA's compile is not), so a
    stopped run waits for it at exit.
    """

    def __init__(self, threads: int = 2) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="ltx-jax-compile")
        self._cancelled = threading.Event()
        self._submitted: list[concurrent.futures.Future] = []

    def submit(self, *sequences: Sequence[Callable[[], object]]) -> None:
        """Starts each non-empty sequence of compilations on a thread, in its order."""
        self._cancelled = threading.Event()  # its own: `cancel` also stops an earlier call's remainder
        self._submitted = [self._executor.submit(self._run, tuple(s), self._cancelled) for s in sequences if s]

    def wait(self) -> None:
        """Returns once everything `submit` started has finished (or was skipped by `cancel`)."""
        concurrent.futures.wait(self._submitted)

    def cancel(self) -> None:
        self._cancelled.set()

    @staticmethod
    def _run(compilations: tuple[Callable[[], object], ...], cancelled: threading.Event) -> None:
        for compile_one in compilations:
            if cancelled.is_set():
                return
            start = time.perf_counter()
            name = getattr(compile_one, "func", compile_one).__qualname__
            try:
                compile_one()
            except Exception as error:  # noqa: BLE001 - see the class docstring
                _LOG.warning("compiling %s ahead failed (%s); it compiles when it is called", name, error)
            else:
                _LOG.info("compiled ahead: %s in %.1f s", name, time.perf_counter() - start)


def compile_after_stage_1(
    compiler: BackgroundCompiler,
    components: Components,
    video: VideoDecoding | None,
    audio: AudioDecoding,
    request: Request,
    flow: Flow,
    plan: Plan,
) -> None:
    """Has what runs after stage 1 for `request` compiled on `compiler`'s threads, each sequence in
    the order it runs, all of it read from `flow`'s `plan` for it: on one, the upsampler and the later stages'
    DiT programs (every process runs them, and compiles them), then the audio decoder; on the other,
    the video decoder. Only process 0 decodes, and only it compiles the decoders. The audio decoder
    (48 s to compile beside a cold stage 1 on an H200) followed the video's tiles until stage 1
    compiled one block program; then decoding began before it was compiled (8.8 s more of decoding),
    while the first thread was idle after stage 2's."""
    stages = plan.stages
    later: list[Callable[[], object]] = []
    for before, stage in zip(stages, stages[1:], strict=False):
        if stage.initial_video == "upsampled" and isinstance(components.upsample, Upsampling):
            shape = components.geometry.video(stage_pixels(request, before.downscale)).shape
            later.append(functools.partial(components.upsample.compile_ahead, shape, components.dtype))
    for stage, inputs in later_first_forwards(components, request, plan):
        later.append(functools.partial(_compile_stage, stage_transformer(components, stage), inputs))
    video_decoder, audio_decoder = [], []
    if jax.process_index() == 0:
        video_shape, audio_shape = final_latent_shapes(components, request, plan)
        if video is not None:  # None: an audio-only flow's
            video_decoder.append(functools.partial(video.compile_ahead, video_shape, components.dtype))
        if flow.audio_output == "decoded" and request.prompt.audio is not None:
            audio_decoder.append(functools.partial(audio.compile_ahead, audio_shape))
    compiler.submit(later + audio_decoder, video_decoder)


def _compile_stage(transformer: Any, inputs: tuple) -> None:  # noqa: ANN401 - a Forward
    """Compiles a later stage's DiT programs (`SequenceParallel.compile_ahead`, through `TimedForward`);
    a stage that starts while they compile waits for them."""
    transformer.compile_ahead(*inputs)


def decoder_callables(
    video_decoder: nnx.Module | None,
    audio_decoder: nnx.Module,
    vocoder: nnx.Module,
    mesh: object = None,
    tiling: video_vae.TileSizeConfig | None = None,
) -> tuple[VideoDecoding | DiffusionVideoDecoding | None, AudioDecoding]:
    """The decoders as `PipelineModels` holds them: the video in tiles over this process's devices of
    `mesh` (a `jax.sharding.Mesh`), or (the conv decoder) in one pass without one; the audio on the first of them.
    `tiling`: the video's tiles (None: the conv decoder's default, the diffusion decoder's recommended sizes).
    No video decoder (an audio-only flow): None for the video."""
    devices = None if mesh is None else list(mesh.local_devices)
    if video_decoder is None:
        return None, AudioDecoding(audio_decoder, vocoder, devices[0] if devices else jax.local_devices()[0])
    if isinstance(video_decoder, video_vae.DiffusionVideoDecoder):
        video = DiffusionVideoDecoding(video_decoder, devices, tiling)
    else:
        video = VideoDecoding(video_decoder, devices, tiling)
    return video, AudioDecoding(audio_decoder, vocoder, video.device)
