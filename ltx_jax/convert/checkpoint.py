"""Official safetensors checkpoint -> Orbax checkpoint, and either one -> an `LTXModel` on a mesh.

A converted checkpoint is a directory:
    ltx_jax_checkpoint.json   format version, the LTXConfig, dtype, model_version, source, LoRAs
    params/00000, 00001, ...  Orbax PyTree checkpoints ("parts", `orbax_parts`) of the parameters in JAX
                              layout, keyed by their module paths (`transformer_blocks/3/attn1/to_q/kernel`);
                              the manifest lists each part's keys (format 1: `params/` is one checkpoint)

Conversion streams: tensors are read, converted and written 256 MB at a time, a part each, into a hidden
temporary directory that is renamed into place only when complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, SingleDeviceSharding
from orbax.checkpoint import v1 as ocp

from ltx_jax.config import LTXConfig, ModelType
from ltx_jax.convert.dit_tensors import DitTensors, Lora, checkpoint_config, parse_dtype
from ltx_jax.convert.orbax_parts import PartWriter, check_parts, lookup, manifest_key, nest, restore_parts
from ltx_jax.convert.placement import Progress, place_parameter, place_table
from ltx_jax.convert.quantize_on_load import QuantizeOnLoad
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import expected_keys, param_variables, set_params, transpose
from ltx_jax.interrupts import raise_if_signalled
from ltx_jax.model.attention_backends import AttentionBackend
from ltx_jax.model.model import LTXModel
from ltx_jax.model.quantization import Quantization, check_quantization
from ltx_jax.parallel.sharding import param_sharding

FORMAT_FILE = "ltx_jax_checkpoint.json"
PARAMS_DIR = "params"
FORMAT_VERSION = 2  # 2: parts (orbax_parts); 1: one checkpoint written by Orbax partial saves
READABLE_FORMATS = (1, 2)


@dataclasses.dataclass(frozen=True)
class ConversionSummary:
    tensors: int
    bytes: int
    dtype: str
    seconds: float
    skipped: dict[str, int]

    def __str__(self) -> str:
        skipped = ", ".join(f"{name} ({count} tensors)" for name, count in sorted(self.skipped.items())) or "nothing"
        return (
            f"converted {self.tensors} tensors, {self.bytes / 1e9:.2f} GB {self.dtype}, in {self.seconds:.1f} s "
            f"({self.bytes / 1e6 / max(self.seconds, 1e-9):.0f} MB/s); left for their own loaders: {skipped}"
        )


def convert_checkpoint(
    src: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    dtype: str = "bfloat16",
    loras: Sequence[Lora] = (),
    config: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> ConversionSummary:
    """Converts the DiT of `src` into an Orbax checkpoint at `out_dir` (which must not exist).

    `config` replaces the file's metadata config (the parsed `config` JSON, `{"transformer": ...}`).
    A failure at any point leaves no `out_dir` (and no temporary directory) behind.
    """
    start = time.perf_counter()
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir):
        raise ValueError(f"Output directory {out_dir} already exists; remove it or choose another path.")
    target = parse_dtype(dtype)
    st = SafetensorsFile(src)
    cfg, model_version = checkpoint_config(st, config)
    table = expected_keys(LTXModel.abstract(cfg, target))
    tensors = DitTensors(st, target, tuple(loras))
    tensors.check_against(table)
    total = sum(int(np.prod(shape)) * target.itemsize for _, _, shape, _ in table.values())
    tmp = os.path.join(os.path.dirname(out_dir), f".{os.path.basename(out_dir)}.partial-{uuid.uuid4().hex[:8]}")
    bar = Progress(total, f"converting {os.path.basename(os.fspath(src))}", progress)
    try:
        os.makedirs(tmp)
        parts = _write_params(os.path.join(tmp, PARAMS_DIR), tensors, table, bar)
        with open(os.path.join(tmp, FORMAT_FILE), "w") as f:
            json.dump(_manifest(cfg, target, model_version, src, loras) | {"parts": parts}, f, indent=1)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        bar.close()
    return ConversionSummary(len(table), bar.done, target.name, time.perf_counter() - start, tensors.skipped)


def _write_params(path: str, tensors: DitTensors, table: Mapping[str, tuple], bar: Progress) -> list[list[str]]:
    """Streams the parameters into parts (`orbax_parts.PartWriter`), at most `PART_BYTES` (plus one
    tensor) held; returns each part's keys."""
    writer = PartWriter(path)
    for key, (param_path, transposed, _, _) in table.items():
        raise_if_signalled()
        array = tensors.read(key)
        if transposed:  # rebinding drops the untransposed copy at once
            array = transpose(array)
        writer.add(param_path, array)
        bar.update(array.nbytes)
    return writer.close()


def _manifest(cfg: LTXConfig, dtype: np.dtype, model_version: str | None, src: Any, loras: Sequence[Lora]) -> dict:
    return {
        "format": FORMAT_VERSION,
        "config": dataclasses.asdict(cfg),
        "dtype": dtype.name,
        "model_version": model_version,
        "source": os.path.basename(os.fspath(src)),
        "loras": [dataclasses.asdict(lora) for lora in loras],
    }


def converted_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a directory written by `convert_checkpoint` (its config, dtype, model version, the
    name of the file it came from and, from format 2, each part's keys); raises `ValueError` if `path` is
    not one this ltx-jax reads."""
    manifest_path = os.path.join(path, FORMAT_FILE)
    if not os.path.isfile(manifest_path):
        raise ValueError(f"{os.fspath(path)} is not a converted ltx-jax checkpoint: it has no {FORMAT_FILE}.")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format") not in READABLE_FORMATS:
        raise ValueError(
            f"{os.fspath(path)}: checkpoint format {manifest.get('format')!r}; this ltx-jax reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))}. A newer format needs a newer ltx-jax; otherwise convert the "
            ".safetensors file again with this one."
        )
    parts = manifest.get("parts")
    if manifest["format"] >= 2 and not (
        isinstance(parts, list) and all(isinstance(p, list) and all(isinstance(k, str) for k in p) for p in parts)
    ):
        raise ValueError(
            f"{manifest_path}: 'parts' must list each part's parameter keys (lists of strings), got "
            f"{type(parts).__name__}: the file is damaged; convert the .safetensors file again."
        )
    return manifest


def load_checkpoint(
    path: str | os.PathLike,
    mesh: Mesh | None = None,
    dtype: jnp.dtype = jnp.bfloat16,
    shard_weights: bool = False,
    *,
    config: Mapping[str, Any] | None = None,
    loras: Sequence[Lora] = (),
    attention_backend: AttentionBackend = "auto",
    progress: bool = True,
    quantization: Quantization = "none",
    model_type: ModelType | None = None,
) -> tuple[LTXModel, LTXConfig]:
    """Loads a converted Orbax directory or an official `.safetensors` file as `(model, cfg)`.

    Args:
        path: a directory written by `convert_checkpoint`, or a `.safetensors` checkpoint (read
            tensor by tensor, no conversion step).
        mesh: place the parameters on this mesh: replicated, or with `shard_weights` split over its
            `"sp"` axis (FSDP-style; `SequenceParallel` gathers them block by block). Without a mesh
            they go to the default device.
        dtype: parameter dtype.
        config: for `.safetensors` only: the config JSON, replacing the file's metadata.
        loras: for `.safetensors` only: LoRAs fused at load time (convert_checkpoint fuses them
            into a converted checkpoint).
        progress: a progress bar on stderr while a `.safetensors` file loads.
        quantization: "fp8-cast" keeps the transformer blocks' linear weights in float8_e4m3fn, upcast
            to `dtype` in the matmuls (`ltx_jax.model.quantization`). "fp8" runs most blocks' linears as
            fp8 matmuls (per-tensor scaled weights; inputs scaled per token, or by the static `input_scale`
            an fp8 file stores beside the weight, as ltx-core's fp8_scaled_mm; `Fp8Linear`) and their video
            self-attention in fp8 (`ltx_jax.model.fp8_attention`); a kernel the file stores in fp8 with a
            per-tensor scale is kept as stored (one a LoRA is fused into is quantized again, keeping its
            `input_scale`). Each weight is quantized as it
            is placed (`quantize_on_load`; a converted directory part by part), so the model never sits
            on the devices in `dtype` as a whole, except where `quantize_on_load` says.
        model_type: "audio" takes the audio-only DiT from an audio-video file (`modality_model`: 1.2.0's
            `LTXAudioOnlyModelConfigurator` with its `LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP`); None: the
            file's own.
    """
    target = parse_dtype(dtype)
    check_quantization(quantization)
    if shard_weights and mesh is None:
        raise ValueError("shard_weights=True needs a mesh to shard over; pass mesh=make_mesh(n).")
    path = os.fspath(path)
    if os.path.isdir(path):
        if config is not None or loras:
            raise ValueError("config and loras apply to .safetensors files; a converted checkpoint has them built in.")
        model, cfg, quantize = _load_converted(
            path, mesh, target, shard_weights, attention_backend, quantization, model_type
        )
    elif path.endswith(".safetensors") and os.path.isfile(path):
        model, cfg, quantize = _load_safetensors(
            path, mesh, target, shard_weights, config, tuple(loras), attention_backend, progress, quantization,
            model_type,
        )  # fmt: skip
    else:
        raise ValueError(
            f"load_checkpoint: {path!r} is neither a directory written by convert_checkpoint nor a .safetensors file."
        )
    return quantize.finish(model, target), cfg


def _sharding(shape: tuple[int, ...], mesh: Mesh | None, shard_weights: bool) -> jax.sharding.Sharding:
    return SingleDeviceSharding(jax.devices()[0]) if mesh is None else param_sharding(shape, mesh, shard_weights)


def _load_safetensors(
    path: str,
    mesh: Mesh | None,
    dtype: np.dtype,
    shard_weights: bool,
    config: Mapping[str, Any] | None,
    loras: tuple[Lora, ...],
    attention_backend: AttentionBackend,
    progress: bool,
    quantization: Quantization,
    model_type: ModelType | None = None,
) -> tuple[LTXModel, LTXConfig, QuantizeOnLoad]:
    st = SafetensorsFile(path)
    cfg, _ = checkpoint_config(st, config)
    model = LTXModel.abstract(cfg, dtype, attention_backend)
    table = expected_keys(model)
    tensors = DitTensors(st, dtype, loras)
    tensors.check_against(table)  # the whole file, strictly, whatever part of it is taken
    if model_type not in (None, cfg.model_type):
        cfg, model, table = modality_model(cfg, table, model_type, path, dtype, attention_backend)
    quantize = QuantizeOnLoad.plan(model, quantization, table)
    sharding_for = functools.partial(_sharding, mesh=mesh, shard_weights=shard_weights)

    def place(key: str, transposed: bool, torch_shape: tuple[int, ...], _: np.dtype) -> jax.Array:
        path = table[key][0]
        fp8 = path in quantize.fp8_kernels
        stored_scale = tensors.stored_fp8_scale(key) if fp8 else None
        input_scale = tensors.stored_input_scale(key) if fp8 else None
        read = tensors.read if stored_scale is None else tensors.read_stored
        values = place_parameter(torch_shape, transposed, sharding_for, lambda box: read(key, box))
        if input_scale is not None:
            quantize.keep_input_scale(path, input_scale, values)
        return quantize(path, values) if stored_scale is None else quantize.place_stored(path, values, stored_scale)

    placed = place_table(table, place, f"loading {os.path.basename(path)}", progress)
    return set_params(model, placed), cfg, quantize


def _load_converted(
    path: str,
    mesh: Mesh | None,
    dtype: np.dtype,
    shard_weights: bool,
    attention_backend: AttentionBackend,
    quantization: Quantization,
    model_type: ModelType | None = None,
) -> tuple[LTXModel, LTXConfig, QuantizeOnLoad]:
    manifest = converted_manifest(path)
    cfg = LTXConfig(**manifest["config"])
    stored = parse_dtype(manifest["dtype"])
    model = whole = LTXModel.abstract(cfg, dtype, attention_backend)
    parts = manifest.get("parts")
    if model_type not in (None, cfg.model_type):  # the parts checked against the whole DiT, its part restored
        cfg, model, _ = modality_model(cfg, expected_keys(whole), model_type, path, dtype, attention_backend)
        if manifest["format"] == 1:
            raise ValueError(
                f"{path} is a format-1 checkpoint, which loads whole: convert the .safetensors file again with this "
                "ltx-jax to load its audio-only DiT, or load the .safetensors file."
            )
        check_parts(os.path.join(path, PARAMS_DIR), parts, param_variables(whole))
        kept = {manifest_key(p) for p in param_variables(model)}
        parts = [[key for key in keys if key in kept] for keys in parts]
    shapes = {p: v.get_value().shape for p, v in param_variables(model).items()}
    abstract = {
        p: jax.ShapeDtypeStruct(shape, stored, sharding=_sharding(shape, mesh, shard_weights))
        for p, shape in shapes.items()
    }
    quantize = QuantizeOnLoad.plan(model, quantization)

    def finish(param_path: tuple[Any, ...], value: jax.Array) -> jax.Array:
        return quantize(param_path, value.astype(dtype))

    params = os.path.join(path, PARAMS_DIR)
    if manifest["format"] == 1:
        restored = ocp.load(params, nest(abstract))
        values = {p: finish(p, lookup(restored, p)) for p in abstract}
    else:  # each part quantized as it is restored; the audio-only DiT restores some keys of a part
        context = contextlib.nullcontext() if model is whole else ocp.Context()
        if model is not whole:
            context.pytree.loading.partial_load = True
        with context:
            values = restore_parts(params, parts, abstract, finish)
    return set_params(model, values), cfg, quantize


def modality_model(
    cfg: LTXConfig,
    table: dict[str, tuple],
    model_type: ModelType,
    path: str,
    dtype: np.dtype,
    attention_backend: AttentionBackend,
) -> tuple[LTXConfig, LTXModel, dict[str, tuple]]:
    """`(cfg, model, table)` of the `model_type` DiT within a file's audio-video DiT `cfg` (its keys `table`): the
    audio-only DiT as 1.2.0's `LTXAudioOnlyModelConfigurator` builds it, the audio stream's modules alone, but with
    the file's switches (`ff_bias`, `audio_ff_bias`, `use_prompt_adaln_single`), which 1.2.0's configurator drops,
    so that it cannot build from an LTX-2.5 file. Its keys are those 1.2.0's `LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP`
    reads (`audio_patchify_proj`, `audio_adaln_single`, `audio_prompt_*`, `audio_scale_shift_table`,
    `audio_proj_out`, each block's `audio_attn1`, `audio_attn2`, `audio_ff`), each as the file has it; the video
    stream and the audio-video cross-attention are never read."""
    if cfg.model_type != "av":
        raise ValueError(
            f"{path} holds a model_type={cfg.model_type!r} DiT; a {model_type!r} one is taken from an audio-video file."
        )
    part = dataclasses.replace(cfg, model_type=model_type)
    model = LTXModel.abstract(part, dtype, attention_backend)
    part_table = expected_keys(model)
    foreign = sorted(k for k, entry in part_table.items() if k not in table or table[k][2] != entry[2])
    if foreign:
        raise ValueError(f"{path}: the {model_type}-only DiT's keys {foreign[:8]} are not the file's (name and shape).")
    return part, model, part_table
