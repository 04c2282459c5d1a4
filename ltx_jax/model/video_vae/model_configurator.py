"""Checkpoint config -> video VAE modules, and checkpoint keys -> module keys.

Source: `ltx_core/model/video_vae/model_configurator.py` (`VideoEncoderConfigurator`,
`VideoDecoderConfigurator`, `VAE_{ENCODER,DECODER}_COMFY_KEYS_FILTER`). The defaults are ltx-core's:
note the decoder pads with "reflect" and is timestep-conditioned unless the config says otherwise.

LTX-2.5's diffusion VAE (`_class_name` "CausalDiffusionVAE", 1.2.0's `_build_diffusion_video_decoder` and
`video_decoder_sd_ops_for_checkpoint`): `diffusion_video_decoder_from_config`, `diffusion_vae_decoder_state_dict`,
`load_diffusion_video_decoder(path)`; its encoder is the conv encoder, configured under `vae.encoder`
(`video_encoder_from_config` reads either layout, as 1.2.0's `_prepare_video_encoder_kwargs`). `is_diffusion_vae`
tells which decoder a config has (1.2.0's `is_diffusion_video_vae`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.convert.safetensors_file import SafetensorsFile, lazy_tensors, parse_metadata_json
from ltx_jax.convert.state_dict import load_state_dict, to_numpy
from ltx_jax.model.abstract import abstract_module
from ltx_jax.model.video_vae.conv_video_decoder import VideoDecoder
from ltx_jax.model.video_vae.diffusion_video_decoder import DiffusionDecoderConfig, DiffusionVideoDecoder
from ltx_jax.model.video_vae.enums import LogVarianceType, NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.ops import MEAN_KEY, STD_KEY
from ltx_jax.model.video_vae.video_vae import VideoEncoder

_CONV_VAE_CLASS_NAME = "CausalVideoAutoencoder"
_DIFFUSION_VAE_CLASS_NAME = "CausalDiffusionVAE"
_STATISTICS = "per_channel_statistics."


def _enum(enum: type, config: dict[str, Any], key: str, default: str) -> Any:  # noqa: ANN401 - an enum member
    value = config.get(key, default)
    try:
        return enum(value)
    except ValueError:
        valid = ", ".join(repr(m.value) for m in enum)
        raise ValueError(f"vae.{key}={value!r} is not valid; use one of {valid}.") from None


def _vae_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint's parsed `config` JSON ({"vae": {...}, ...}) -> its `vae` dict, checked."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be the checkpoint's parsed `config` dict, got {type(config).__name__}.")
    vae = dict(config.get("vae", {}))
    class_name = vae.get("_class_name", _CONV_VAE_CLASS_NAME)
    if class_name != _CONV_VAE_CLASS_NAME:
        raise ValueError(
            f"vae._class_name={class_name!r}: this builds the convolutional {_CONV_VAE_CLASS_NAME!r}; load a "
            f"{_DIFFUSION_VAE_CLASS_NAME!r} decoder with `load_diffusion_video_decoder(path)`."
        )
    if vae.get("dims", 3) != 3:
        raise ValueError(f"vae.dims={vae['dims']!r}: only 3-D convolutions (dims=3, every LTX-2 VAE) are ported.")
    return vae


def is_diffusion_vae(config: Mapping[str, Any]) -> bool:
    """Whether the checkpoint's parsed `config` describes LTX-2.5's diffusion VAE (`vae._class_name`)."""
    vae = config.get("vae", {}) if isinstance(config, Mapping) else {}
    return isinstance(vae, Mapping) and vae.get("_class_name") == _DIFFUSION_VAE_CLASS_NAME


def video_latent_channels(config: Mapping[str, Any]) -> int:
    """The video latent's channels: `vae.latent_channels`, else a CausalDiffusionVAE's `vae.decoder.in_channels`
    (where 1.2.0 falls back to the former), else 128."""
    vae = config.get("vae", {})
    if "latent_channels" in vae:
        return vae["latent_channels"]
    decoder = vae.get("decoder", {}) if is_diffusion_vae(config) else {}
    return decoder.get("in_channels", 128)


def _encoder_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder's settings, under the flat (conv) file's names: a `vae.encoder` section as 1.2.0's
    `_prepare_video_encoder_kwargs` reads it (`blocks`, `out_channels` the latent width; anything it lacks from
    `vae`), else the flat `vae` section, checked."""
    vae = config.get("vae", {}) if isinstance(config, Mapping) else None
    if not isinstance(vae, Mapping) or not isinstance(vae.get("encoder"), Mapping):
        return _vae_section(config)
    encoder = vae["encoder"]
    section = {
        **encoder,
        "latent_channels": encoder.get("out_channels", vae.get("latent_channels", 128)),
        "encoder_blocks": encoder.get("blocks", encoder.get("encoder_blocks", [])),
        "spatial_padding_mode": encoder.get("spatial_padding_mode", vae.get("encoder_spatial_padding_mode", "zeros")),
        "dims": encoder.get("dims", vae.get("dims", 3)),
    }
    if section["dims"] != 3:
        raise ValueError(f"vae.encoder.dims={section['dims']!r}: only 3-D convolutions (dims=3) are ported.")
    return section


def video_encoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> VideoEncoder:
    """`VideoEncoderConfigurator.from_config`: the checkpoint's `config` dict -> a `VideoEncoder` (a conv file's flat
    `vae`, or a CausalDiffusionVAE's `vae.encoder`)."""
    vae = _encoder_section(config)
    return VideoEncoder(
        in_channels=vae.get("in_channels", 3),
        out_channels=vae.get("latent_channels", 128),
        encoder_blocks=vae.get("encoder_blocks", []),
        patch_size=vae.get("patch_size", 4),
        norm_layer=_enum(NormLayerType, vae, "norm_layer", "pixel_norm"),
        latent_log_var=_enum(LogVarianceType, vae, "latent_log_var", "uniform"),
        encoder_spatial_padding_mode=_enum(PaddingModeType, vae, "spatial_padding_mode", "zeros"),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def video_decoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> VideoDecoder:
    """`VideoDecoderConfigurator.from_config`: the checkpoint's `config` dict -> a `VideoDecoder`."""
    vae = _vae_section(config)
    return VideoDecoder(
        in_channels=vae.get("latent_channels", 128),
        out_channels=vae.get("out_channels", 3),
        decoder_blocks=vae.get("decoder_blocks", []),
        patch_size=vae.get("patch_size", 4),
        norm_layer=_enum(NormLayerType, vae, "norm_layer", "pixel_norm"),
        causal=vae.get("causal_decoder", False),
        timestep_conditioning=vae.get("timestep_conditioning", True),
        decoder_spatial_padding_mode=_enum(PaddingModeType, vae, "spatial_padding_mode", "reflect"),
        base_channels=vae.get("decoder_base_channels", 128),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def _select(state_dict: Mapping[str, Any], part: str) -> dict[str, Any]:
    """ltx-core's VAE key filter for `part` ("encoder" / "decoder"): `vae.<part>.k` or bare `<part>.k` -> `k`,
    `[vae.]per_channel_statistics.k` -> `per_channel_statistics.k`; every other key is dropped.

    Only the two statistics the model uses are kept: LTX-Video-era files also carry e.g.
    `mean-of-stds`, which ltx-core's non-strict load ignores.
    """
    used = {_STATISTICS + STD_KEY, _STATISTICS + MEAN_KEY}
    selected: dict[str, Any] = {}
    for key, value in state_dict.items():
        name = key.removeprefix("vae.")
        if name.startswith(part + "."):
            selected[name.removeprefix(part + ".")] = value
        elif name in used:
            selected[name] = value
    return selected


def vae_encoder_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Checkpoint tensors -> `VideoEncoder` keys (load with `ltx_jax.load_state_dict(encoder, sd, prefix="")`)."""
    return _select(state_dict, "encoder")


def vae_decoder_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Checkpoint tensors -> `VideoDecoder` keys (load with `ltx_jax.load_state_dict(decoder, sd, prefix="")`)."""
    return _select(state_dict, "decoder")


# The `vae.decoder` keys 1.2.0's `_build_diffusion_video_decoder` reads (-> DiffusionDecoderConfig fields), and
# keys it ignores that are checked here: the decoder class (the one it ports) and its resampler (the only one
# it has; no convolutions, so no padding mode either).
_DECODER_FIELDS = (
    "in_channels", "out_channels", "patch_size", "head_dim", "t_emb_dim", "default_num_inference_steps",
    "timestep_scale_multiplier", "stage_channels", "stage_depths", "stage_kernels", "upsamples", "stage5_kernel",
    "stage5_channels",
)  # fmt: skip
_DECODER_CHECKED = {"_class_name": "NADiffusionDecoder", "resampler_kind": "linear"}
_DECODER_IGNORED = {"na_head_dim", "spatial_padding_mode"}  # na_head_dim: head_dim's older name, read below


def _tuples(value: Any) -> Any:  # noqa: ANN401 - nested JSON lists
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


def diffusion_decoder_config(config: Mapping[str, Any]) -> DiffusionDecoderConfig:
    """The checkpoint's parsed `config` JSON ({"vae": {"_class_name": "CausalDiffusionVAE", "decoder": {...},
    "model_output_type": ...}}) -> the decoder's config: upstream's class defaults where the file is silent."""
    vae = config.get("vae", {}) if isinstance(config, Mapping) else None
    if not isinstance(vae, Mapping) or vae.get("_class_name") != _DIFFUSION_VAE_CLASS_NAME:
        found = vae.get("_class_name", _CONV_VAE_CLASS_NAME) if isinstance(vae, Mapping) else vae
        raise ValueError(
            f"vae._class_name={found!r}: a diffusion decoder needs a {_DIFFUSION_VAE_CLASS_NAME!r} file "
            "(a convolutional VAE loads with `video_decoder_from_config`)."
        )
    decoder = vae.get("decoder")
    if not isinstance(decoder, Mapping):
        raise ValueError("vae.decoder is missing: a CausalDiffusionVAE file nests its decoder's config there.")
    unknown = sorted(set(decoder) - {*_DECODER_FIELDS, *_DECODER_CHECKED, *_DECODER_IGNORED})
    if unknown:
        raise ValueError(f"vae.decoder has keys this port does not know: {unknown}; known: {sorted(_DECODER_FIELDS)}.")
    for key, expected in _DECODER_CHECKED.items():
        if decoder.get(key, expected) != expected:
            raise ValueError(f"vae.decoder.{key}={decoder[key]!r} is not supported (ltx-core 1.2.0 has {expected!r}).")
    fields = {key: _tuples(decoder[key]) for key in _DECODER_FIELDS if key in decoder}
    fields.setdefault("in_channels", vae.get("latent_channels", 128))
    if "head_dim" not in fields and "na_head_dim" in decoder:
        fields["head_dim"] = decoder["na_head_dim"]
    return DiffusionDecoderConfig(**fields, model_output_type=vae.get("model_output_type", "v"))


def diffusion_video_decoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> DiffusionVideoDecoder:
    """1.2.0's `VideoDecoderConfigurator` for a CausalDiffusionVAE: the `config` dict -> the decoder."""
    return DiffusionVideoDecoder(diffusion_decoder_config(config), rngs=rngs, param_dtype=param_dtype)


@dataclasses.dataclass(frozen=True)
class _Derived:
    """A tensor computed from file tensors when it is read (`np.asarray`); its shape is known before."""

    shape: tuple[int, ...]
    compute: Callable[[], np.ndarray]

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:  # noqa: ARG002
        array = self.compute()
        return array if dtype is None else array.astype(dtype)


_GATE_TARGETS = ((".attn.proj.", ".gate_msa"), (".mlp.w_down.", ".gate_mlp"), (".context_proj.", ".gate_ctx"))
_GATES = tuple(gate for _, gate in _GATE_TARGETS)
_T_EMBEDDER = (("t_embedder.mlp.0.", "t_embedder.timestep_embedder.linear_1."),
               ("t_embedder.mlp.2.", "t_embedder.timestep_embedder.linear_2."))  # fmt: skip
# Tensors a shipped decoder carries that the module has no place for; 1.2.0's non-strict load ignores them
# (`coarse_*`, a preview head, it drops explicitly). `type_emb` is reported in the ltx-2.5 video VAE file.
_UNUSED = ("type_emb",)


def _split_qkv(key: str, value: Any) -> dict[str, _Derived]:  # noqa: ANN401 - a file tensor
    """Fused `...qkv.{weight,bias}` (3 dim, ...) -> `...qkv.to_{q,k,v}.{weight,bias}` thirds."""
    if value.shape[0] % 3:
        raise ValueError(f"{key}: fused qkv of shape {tuple(value.shape)}, whose first axis is not divisible by 3.")
    third, (prefix, leaf) = value.shape[0] // 3, key.rsplit(".", 1)
    return {
        f"{prefix}.{name}.{leaf}": _Derived(
            (third, *value.shape[1:]), lambda i=i: to_numpy(value)[i * third : (i + 1) * third]
        )
        for i, name in enumerate(("to_q", "to_k", "to_v"))
    }


def _fold(key: str, value: Any, gate_key: str, gate: Any) -> _Derived:  # noqa: ANN401 - file tensors
    """`gate * W` row-wise (W: (out, in)) or `gate * b`, in float32, back in the file's dtype, as upstream."""
    if tuple(gate.shape) != (value.shape[0],):
        raise ValueError(f"{gate_key} has shape {tuple(gate.shape)}; it scales the {value.shape[0]} rows of {key}.")

    def folded() -> np.ndarray:
        weight = to_numpy(value)
        scale = to_numpy(gate).astype(np.float32).reshape(-1, *([1] * (weight.ndim - 1)))
        return (scale * weight.astype(np.float32)).astype(weight.dtype)

    return _Derived(tuple(value.shape), folded)


def diffusion_vae_decoder_state_dict(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """A CausalDiffusionVAE file's tensors -> `DiffusionVideoDecoder` keys, as 1.2.0's
    `video_decoder_sd_ops_for_checkpoint`: `[vae.]decoder.*` with the prefix stripped and
    `[vae.]per_channel_statistics.*`; fused `qkv` split; `t_embedder.mlp.{0,2}` -> `timestep_embedder.linear_{1,2}`;
    `coarse_*` dropped; the static gates `gate_msa` / `gate_mlp` / `gate_ctx` folded into the rows of the
    block's `attn.proj` / `mlp.w_down` / `context_proj`. Other keys (the encoder's) are not the decoder's.
    Values stay lazy; load with `ltx_jax.load_state_dict(decoder, sd, prefix="")`, which is strict."""
    statistics = {_STATISTICS + STD_KEY, _STATISTICS + MEAN_KEY}
    out, gates = {}, {}
    for key, value in tensors.items():
        name = key.removeprefix("vae.")
        if name in statistics:
            out[name] = value
            continue
        if not name.startswith("decoder."):
            continue
        name = name.removeprefix("decoder.")
        for old, new in _T_EMBEDDER:
            name = new + name.removeprefix(old) if name.startswith(old) else name
        if name.startswith("coarse_") or name in _UNUSED:
            continue
        if name.endswith(_GATES):
            gates[name] = value
        elif name.endswith((".qkv.weight", ".qkv.bias")):
            out.update(_split_qkv(name, value))
        else:
            out[name] = value
    return _fold_gates(out, gates)


def _fold_gates(state_dict: dict[str, Any], gates: dict[str, Any]) -> dict[str, Any]:
    used = set()
    for key in list(state_dict):
        for target, gate in _GATE_TARGETS:
            prefix = key.rpartition(target)[0]
            if key.endswith((target + "weight", target + "bias")) and prefix + gate in gates:
                state_dict[key] = _fold(key, state_dict[key], prefix + gate, gates[prefix + gate])
                used.add(prefix + gate)
    unused = sorted(set(gates) - used)
    if unused:
        raise ValueError(f"decoder gates with no linear to fold into: {unused} (`gate_msa` scales `attn.proj`, "
                         "`gate_mlp` `mlp.w_down`, `gate_ctx` `context_proj`, of the same block).")  # fmt: skip
    return state_dict


def load_diffusion_video_decoder(
    path: str | os.PathLike, *, param_dtype: jnp.dtype = jnp.float32
) -> DiffusionVideoDecoder:
    """The diffusion decoder of a CausalDiffusionVAE file (e.g. `ltx-2.5-video-vae-bf16.safetensors`): its
    `config` metadata's `vae.decoder`, its weights in `param_dtype`. Raises `ValueError` naming any tensor
    the decoder lacks or does not know, or a config this port does not implement."""
    file = SafetensorsFile(path)
    if "config" not in file.metadata:
        raise ValueError(f"{os.fspath(path)}: no `config` metadata; a CausalDiffusionVAE file carries its config.")
    config = diffusion_decoder_config(parse_metadata_json(file.metadata, "config"))
    decoder = abstract_module(lambda rngs: DiffusionVideoDecoder(config, rngs=rngs, param_dtype=param_dtype))
    load_state_dict(decoder, diffusion_vae_decoder_state_dict(lazy_tensors(file)), prefix="")
    return decoder
