"""The DiT tensors of an official LTX-2 safetensors checkpoint, one at a time, ready to load.

Source: ltx-core's `loader/` (`sft_loader.py`, `sd_ops.py`, `fuse_loras.py`) and reference §2-§3.
A monolithic checkpoint holds the DiT under `model.diffusion_model.` next to the text connectors,
the VAEs and the vocoder; only the DiT is taken here, the rest is counted and reported. fp8-scaled
weights (`weight` in F8_E4M3 plus a 0-d `weight_scale`) are dequantized; LoRAs
(`lora_A [r, in]`, `lora_B [out, r]`, no alpha) are fused as `W + strength * B @ A`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import ml_dtypes
import numpy as np

from ltx_jax.config import LTXConfig, ModelType
from ltx_jax.convert.safetensors_file import Box, SafetensorsFile, normalize_box, parse_metadata_json
from ltx_jax.convert.state_dict import DIT_PREFIX, mismatch_problems

logger = logging.getLogger(__name__)

# Inside the DiT prefix but loaded with the text encoder.
TEXT_CONNECTOR_PREFIXES = ("video_embeddings_connector.", "audio_embeddings_connector.")
FP8_SCALE_SUFFIX = ".weight_scale"
FP8_INPUT_SCALE_SUFFIX = ".input_scale"  # static activation scale of fp8 matmuls (quantization="fp8")
OTHER_COMPONENTS = {
    "vae.": "video VAE",
    "audio_vae.": "audio VAE",
    "vocoder.": "vocoder",
    "text_embedding_projection.": "text embedding projection",
}
LORA_PREFIXES = ("model.diffusion_model.", "diffusion_model.")


@dataclasses.dataclass(frozen=True)
class Lora:
    """A LoRA file and its strength (`FILE:STRENGTH` on the command line)."""

    path: str
    strength: float = 1.0

    @staticmethod
    def parse(spec: str) -> Lora:
        path, sep, strength = spec.rpartition(":")
        if not sep:
            return Lora(spec)
        try:
            return Lora(path, float(strength))
        except ValueError:
            raise ValueError(
                f"--lora {spec!r}: the strength after ':' must be a number, e.g. lora.safetensors:0.8."
            ) from None


def component_of(key: str) -> str:
    """'dit', or the name of the other component a checkpoint key belongs to."""
    if key.startswith(DIT_PREFIX):
        rest = key[len(DIT_PREFIX) :]
        return "text connectors" if rest.startswith(TEXT_CONNECTOR_PREFIXES) else "dit"
    return next((name for prefix, name in OTHER_COMPONENTS.items() if key.startswith(prefix)), "unknown")


def infer_model_type(dit_keys: set[str]) -> ModelType:
    has_video, has_audio = "patchify_proj.weight" in dit_keys, "audio_patchify_proj.weight" in dit_keys
    if has_video and has_audio:
        return "av"
    if has_video or has_audio:
        return "video" if has_video else "audio"
    raise ValueError("The checkpoint has neither patchify_proj nor audio_patchify_proj under 'model.diffusion_model.'.")


def checkpoint_config(st: SafetensorsFile, override: Mapping[str, Any] | None = None) -> tuple[LTXConfig, str | None]:
    """`(LTXConfig, model_version)` from the file's `__metadata__`, or from `override` (the parsed
    `config` JSON, `{"transformer": {...}}`), which takes precedence."""
    if override is None:
        if "config" not in st.metadata:
            raise ValueError(
                f"{st.path} has no 'config' in its safetensors metadata (keys: {sorted(st.metadata)}), so its "
                "architecture is unknown. Pass the config JSON: convert_checkpoint.py --config FILE, or "
                "load_checkpoint(..., config=...)."
            )
        override = parse_metadata_json(st.metadata, "config")
    dit_keys = {k[len(DIT_PREFIX) :] for k in st.keys() if component_of(k) == "dit"}
    cfg = LTXConfig.from_metadata(dict(override), model_type=infer_model_type(dit_keys))
    return cfg, st.metadata.get("model_version")


def lora_modules(lora: Lora) -> dict[str, dict[str, str]]:
    """DiT weight key -> {"lora_A": file key, "lora_B": file key} of one LoRA file, from its header alone.
    Raises `ValueError` naming the file for a module without both factors, or a file without any."""
    st = SafetensorsFile(lora.path)
    factors: dict[str, dict[str, str]] = {}
    for key in st.keys():
        stripped = next((key[len(p) :] for p in LORA_PREFIXES if key.startswith(p)), key)
        for part in ("lora_A", "lora_B"):
            marker = f".{part}.weight"
            if stripped.endswith(marker):
                factors.setdefault(stripped[: -len(marker)] + ".weight", {})[part] = key
    incomplete = sorted(k for k, ab in factors.items() if len(ab) != 2)
    if incomplete:
        raise ValueError(f"LoRA {lora.path}: {len(incomplete)} modules lack lora_A or lora_B, e.g. {incomplete[0]!r}.")
    if not factors:
        raise ValueError(f"LoRA {lora.path} has no '*.lora_A.weight' / '*.lora_B.weight' tensors.")
    return factors


def lora_pairs(lora: Lora) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """DiT weight key -> (A, B) of one LoRA file. Reads the whole file: LoRAs are small."""
    st = SafetensorsFile(lora.path)
    return {key: (st.read(ab["lora_A"]), st.read(ab["lora_B"])) for key, ab in lora_modules(lora).items()}


def check_lora_matches(checkpoint: SafetensorsFile, lora: Lora) -> None:
    """Raises `ValueError` before anything loads if no module of `lora` is a DiT weight of `checkpoint`
    (headers only): a LoRA for another model."""
    modules = lora_modules(lora)
    weights = {k[len(DIT_PREFIX) :] for k in checkpoint.keys() if component_of(k) == "dit"}
    if not set(modules) & weights:
        raise ValueError(
            f"LoRA {lora.path} matches no DiT weight of {checkpoint.path} (e.g. {sorted(modules)[0]!r}): it was "
            "trained for another model; pass a LoRA for this checkpoint."
        )


class DitTensors:
    """The DiT tensors of one checkpoint, in ltx-core layout (`[out, in]` Linear weights), key by key.

    Args:
        st: the checkpoint.
        dtype: the dtype every returned tensor has.
        loras: LoRAs fused into the weights they name.
    """

    def __init__(self, st: SafetensorsFile, dtype: np.dtype, loras: tuple[Lora, ...] = ()) -> None:
        self.st = st
        self.dtype = np.dtype(dtype)
        self.names = {k[len(DIT_PREFIX) :]: k for k in st.keys() if component_of(k) == "dit"}
        self.skipped: dict[str, int] = {}
        for key in st.keys():
            if component_of(key) != "dit":
                self.skipped[component_of(key)] = self.skipped.get(component_of(key), 0) + 1
        self._loras = [(lora, lora_pairs(lora)) for lora in loras]

    def weight_keys(self) -> dict[str, str]:
        """Model key -> file key of every tensor that is a parameter (fp8 scale tensors excluded)."""
        return {k: v for k, v in self.names.items() if not k.endswith((FP8_SCALE_SUFFIX, FP8_INPUT_SCALE_SUFFIX))}

    def check_against(self, table: Mapping[str, tuple[Any, bool, tuple[int, ...], Any]]) -> None:
        """Raises one `ValueError` listing missing, unknown and mis-shaped DiT keys, and LoRA modules
        that match no weight; checked before anything is converted or written."""
        weights = self.weight_keys()
        problems = mismatch_problems(table, {v: self.st.info(v) for v in weights.values()}, weights)
        for lora, pairs in self._loras:
            unmatched = sorted(set(pairs) - set(weights))
            if len(unmatched) == len(pairs):
                problems.append(f"LoRA {lora.path} matches no DiT weight (e.g. {unmatched[0]!r})")
            elif unmatched:
                logger.warning("LoRA %s: %d modules are not in this DiT and are skipped", lora.path, len(unmatched))
        if problems:
            raise ValueError(f"{self.st.path}: the DiT tensors do not match the config: " + "; ".join(problems) + ".")

    def stored_fp8_scale(self, key: str) -> np.ndarray | None:
        """The per-tensor scale of the weight `key` where the file stores it in float8_e4m3fn with one
        (and no LoRA is fused into it): `read_stored` values times it are the weight. None otherwise."""
        file_key = self.names[key]
        if any(key in pairs for _, pairs in self._loras) or self.st.info(file_key).dtype != ml_dtypes.float8_e4m3fn:
            return None
        return self._stored_scalar(self._sibling_key(file_key, FP8_SCALE_SUFFIX))

    def stored_input_scale(self, key: str) -> np.ndarray | None:
        """The static input scale (`input_scale`, one value) stored beside the weight `key`; None where there is
        none. A LoRA fused into the weight leaves it as it is: the layer's input does not change (ltx-core
        re-quantizes only the weight)."""
        return self._stored_scalar(self._sibling_key(self.names[key], FP8_INPUT_SCALE_SUFFIX))

    def _stored_scalar(self, file_key: str | None) -> np.ndarray | None:
        """The file's one-value tensor `file_key` as a float32 scalar; None for no key or more than one value."""
        if file_key is None:
            return None
        value = self.st.read(file_key)
        return value.reshape(()).astype(np.float32) if value.size == 1 else None

    def _sibling_key(self, file_key: str, suffix: str) -> str | None:
        """The file key of the weight `file_key`'s scale named by `suffix`, where the file has one."""
        if not file_key.endswith(".weight"):
            return None
        sibling = file_key[: -len(".weight")] + suffix
        return sibling if sibling in self.st else None

    def read_stored(self, key: str, index: Box | None = None) -> np.ndarray:
        """The parameter `key` (or its box) as the file stores it, in its stored dtype."""
        file_key = self.names[key]
        return self.st.read(file_key, normalize_box(self.st.info(file_key).shape, index))

    def read(self, key: str, index: Box | None = None) -> np.ndarray:
        """The parameter `key` (model key, no prefix), dequantized, LoRA-fused, in `self.dtype`; with
        `index` (a step-1 slice per axis, ltx-core layout) only that box, reading only its bytes."""
        file_key = self.names[key]
        box = normalize_box(self.st.info(file_key).shape, index)
        raw = self.st.read(file_key, box)
        scale_key = self._sibling_key(file_key, FP8_SCALE_SUFFIX)
        if scale_key is not None:
            scale = self.st.read(scale_key)
            if scale.size != 1:  # a per-tensor scale commutes with slicing; a per-row or block one would not
                raise ValueError(
                    f"{self.st.path}: {scale_key} has shape {scale.shape}; only per-tensor fp8 scales (one value) "
                    "are supported."
                )
            value = raw.astype(np.float32) * scale.astype(np.float32)
        else:
            value = raw
        deltas = [  # the box's rows of B @ A are B's rows times A's columns
            _delta(pairs[key][0][:, box[1]], pairs[key][1][box[0]], lora.strength, self.dtype)
            for lora, pairs in self._loras
            if key in pairs
        ]
        if deltas:
            value = _fuse(value, deltas, self.dtype)
        return value.astype(self.dtype, copy=False)

    def __iter__(self) -> Iterator[tuple[str, np.ndarray]]:
        for key in self.weight_keys():
            yield key, self.read(key)


def _delta(a: np.ndarray, b: np.ndarray, strength: float, dtype: np.dtype) -> np.ndarray:
    """`strength * b @ a` as ltx-core's `_prepare_deltas` rounds it: `b * strength` in the LoRA's dtype,
    the product accumulated in float32 and rounded to the target dtype."""
    scaled_b = (b.astype(np.float32) * np.float32(strength)).astype(b.dtype)
    return (scaled_b.astype(np.float32) @ a.astype(np.float32)).astype(dtype)


def _fuse(weight: np.ndarray, deltas: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """`weight + sum(deltas)` as `apply_loras` rounds it: several deltas summed in float32 and rounded
    to `dtype` once (`torch.sum` of the stacked deltas), then added to the weight in float32 and
    rounded once."""
    total = deltas[0] if len(deltas) == 1 else np.sum([d.astype(np.float32) for d in deltas], axis=0).astype(dtype)
    return (weight.astype(dtype).astype(np.float32) + total.astype(np.float32)).astype(dtype)


PARAM_DTYPES: dict[str, np.dtype] = {  # the parameter dtypes a checkpoint loads or converts to
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
}


def parse_dtype(name: str) -> np.dtype:
    """'bfloat16' | 'float32' | 'float16' -> numpy dtype, or a ValueError listing the choices."""
    key = np.dtype(name).name if not isinstance(name, str) else name
    if key not in PARAM_DTYPES:
        raise ValueError(f"dtype must be one of {sorted(PARAM_DTYPES)}, got {name!r}.")
    return PARAM_DTYPES[key]


def config_from_json_file(path: str) -> dict[str, Any]:
    """A `--config` file: the checkpoint's `config` JSON (`{"transformer": {...}}`)."""
    with open(path) as f:
        return json.load(f)


def parse_model_version(text: str) -> tuple[int, ...]:
    """ "2.5.0" -> (2, 5, 0); a part that is not a number ends it ("2.3.rc1" -> (2, 3)), as ltx-core's
    `parse_model_version`."""
    parts: list[int] = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)
