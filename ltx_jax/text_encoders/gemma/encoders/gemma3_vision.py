"""Gemma 3's image path in Flax NNX: the SigLIP vision tower and the multimodal projector.

Source: `transformers/models/siglip/modeling_siglip.py` (`SiglipVisionModel`: `SiglipVisionEmbeddings`,
`SiglipEncoder`, `post_layernorm`) and `transformers/models/gemma3/modeling_gemma3.py`
(`Gemma3MultiModalProjector`, `Gemma3Model.get_image_features`). `Gemma3VisionTower(pixel_values)`
is `get_image_features(pixel_values).pooler_output`: the projector applied to the tower's
`last_hidden_state` (after `post_layernorm`). The SigLIP pooling head (`vision_use_head`) never
reaches that output, so its weights are ignored whatever the config says. Attribute paths equal the
checkpoint keys of transformers <= 4.51 (`vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight`,
`multi_modal_projector.mm_input_projection_weight`); `gemma_vision_state_dict` renames the other
layouts to them.

Numerics follow transformers: LayerNorm and the Gemma RMSNorm in float32 (weights included),
returned in the input dtype, as torch's kernels do for half-precision inputs; GELU (tanh
approximation) in float32; attention without mask, scaled by `head_dim^-1/2`, softmax in float32;
the 2-D average pool in float32; `x @ mm_input_projection_weight` in the activation dtype.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.model.abstract import abstract_module, repeated
from ltx_jax.model.conv import Conv
from ltx_jax.model.normalization import layer_norm, linear
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import (
    GEMMA_TEXT_KEY_MAP,
    gemma_json,
    lazy_gemma_tensors,
    place_gemma_tensors,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import HF_TEXT_DEFAULTS
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3RMSNorm

# transformers' SiglipVisionConfig defaults for the fields we read (a config.json stores only the rest).
HF_VISION_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
    "layer_norm_eps": 1e-6,
    "hidden_act": "gelu_pytorch_tanh",
}
HF_MM_TOKENS_PER_IMAGE = 256  # Gemma3Config's default
_VISION_FIELDS = tuple(k for k in HF_VISION_DEFAULTS if k != "hidden_act")


@dataclasses.dataclass(frozen=True)
class Gemma3VisionConfig:
    """SigLIP vision tower sizes (Hugging Face field names) and the projector's: `mm_tokens_per_image`
    image tokens, each of the text model's `text_hidden_size`. Gemma 3 12B: 1152, 4304, 27 layers,
    16 heads, 896 px images in 14 px patches (64 x 64), pooled 4 x 4 to 256 tokens of 3840."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_channels: int
    image_size: int
    patch_size: int
    layer_norm_eps: float
    mm_tokens_per_image: int
    text_hidden_size: int

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"vision hidden_size={self.hidden_size} is not a multiple of num_attention_heads="
                f"{self.num_attention_heads}; SigLIP attention needs it to be."
            )
        if self.image_size % self.patch_size:
            raise ValueError(f"vision image_size={self.image_size} is not a multiple of patch_size={self.patch_size}.")
        if self.tokens_per_side**2 != self.mm_tokens_per_image or self.patches_per_side % self.tokens_per_side:
            raise ValueError(
                f"mm_tokens_per_image={self.mm_tokens_per_image} must be a square whose side divides the "
                f"{self.patches_per_side} patches per side (image_size / patch_size), so the pool tiles the grid."
            )

    @property
    def patches_per_side(self) -> int:
        return self.image_size // self.patch_size

    @property
    def tokens_per_side(self) -> int:
        return round(self.mm_tokens_per_image**0.5)

    @classmethod
    def from_hf_dict(cls, config: Mapping[str, Any]) -> Gemma3VisionConfig:
        """A multimodal Gemma 3 `config.json` dict (`vision_config`, `mm_tokens_per_image`, `text_config`)."""
        vision = config.get("vision_config")
        if vision is None:
            raise ValueError(
                f"the Gemma config (model_type {config.get('model_type')!r}) has no vision_config: image-to-video "
                "prompt enhancement needs the multimodal Gemma 3 directory (Gemma3ForConditionalGeneration, "
                "e.g. gemma-3-12b-it), not a text-only one."
            )
        if vision.get("model_type", "siglip_vision_model") != "siglip_vision_model":
            raise ValueError(
                f"vision_config model_type is {vision['model_type']!r}; this port implements only Gemma 3's "
                "SigLIP tower ('siglip_vision_model')."
            )
        merged = {**HF_VISION_DEFAULTS, **{k: v for k, v in vision.items() if k in HF_VISION_DEFAULTS}}
        if merged["hidden_act"] != "gelu_pytorch_tanh":
            raise ValueError(
                f"vision_config hidden_act is {merged['hidden_act']!r}; this port implements only 'gelu_pytorch_tanh'."
            )
        text = config.get("text_config") or {}
        return cls(
            **{k: merged[k] for k in _VISION_FIELDS},
            mm_tokens_per_image=config.get("mm_tokens_per_image", HF_MM_TOKENS_PER_IMAGE),
            text_hidden_size=text.get("hidden_size", HF_TEXT_DEFAULTS["hidden_size"]),
        )


class LayerNorm(nnx.Module):
    """`torch.nn.LayerNorm(dim, eps)`: normalized, scaled and shifted in float32, returned in the input dtype."""

    def __init__(self, dim: int, *, eps: float, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.eps = eps
        self.weight = nnx.Param(jnp.ones((dim,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((dim,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        normed = layer_norm(x.astype(jnp.float32), self.eps)
        return (normed * self.weight[...].astype(jnp.float32) + self.bias[...].astype(jnp.float32)).astype(x.dtype)


class PositionEmbedding(nnx.Module):
    """`nn.Embedding(num_positions, dim)` read whole: SigLIP adds row i to patch i."""

    def __init__(self, num: int, dim: int, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.weight = nnx.Param(nnx.initializers.normal(dim**-0.5)(rngs.params(), (num, dim), param_dtype))


class SiglipVisionEmbeddings(nnx.Module):
    """Pixels (B, C, H, W) -> patch embeddings (B, (H / p) * (W / p), D), row-major, plus positions."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        p = cfg.patch_size
        self.patch_embedding = Conv(
            cfg.num_channels, cfg.hidden_size, p, ndim=2, stride=p, rngs=rngs, param_dtype=param_dtype
        )
        self.position_embedding = PositionEmbedding(
            cfg.patches_per_side**2, cfg.hidden_size, rngs=rngs, param_dtype=param_dtype
        )

    def __call__(self, pixel_values: jax.Array) -> jax.Array:
        x = self.patch_embedding(pixel_values.astype(self.patch_embedding.weight.dtype))  # (B, D, h, w)
        b, d = x.shape[:2]
        x = x.reshape(b, d, -1).transpose(0, 2, 1)
        return x + self.position_embedding.weight[...].astype(x.dtype)


class SiglipAttention(nnx.Module):
    """Bidirectional multi-head attention with biased q/k/v/out projections, scaled by `head_dim^-1/2`."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        d = cfg.hidden_size
        self.num_heads, self.head_dim = cfg.num_attention_heads, d // cfg.num_attention_heads
        self.k_proj = linear(d, d, rngs=rngs, param_dtype=param_dtype)
        self.v_proj = linear(d, d, rngs=rngs, param_dtype=param_dtype)
        self.q_proj = linear(d, d, rngs=rngs, param_dtype=param_dtype)
        self.out_proj = linear(d, d, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        """(B, N, D) -> (B, N, D)."""
        b, n, d = x.shape
        heads = (b, n, self.num_heads, self.head_dim)
        q, k, v = (proj(x).reshape(heads) for proj in (self.q_proj, self.k_proj, self.v_proj))
        out = jax.nn.dot_product_attention(q, k, v, scale=self.head_dim**-0.5, implementation="xla")
        return self.out_proj(out.reshape(b, n, d))


class SiglipMLP(nnx.Module):
    """`fc2(gelu_tanh(fc1(x)))`, the GELU in float32."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.fc1 = linear(cfg.hidden_size, cfg.intermediate_size, rngs=rngs, param_dtype=param_dtype)
        self.fc2 = linear(cfg.intermediate_size, cfg.hidden_size, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.fc1(x)
        return self.fc2(jax.nn.gelu(h.astype(jnp.float32), approximate=True).astype(h.dtype))


class SiglipEncoderLayer(nnx.Module):
    """Pre-norm block: `x + attn(layer_norm1(x))`, then `x + mlp(layer_norm2(x))`."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.layer_norm1 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, param_dtype=param_dtype)
        self.self_attn = SiglipAttention(cfg, rngs=rngs, param_dtype=param_dtype)
        self.layer_norm2 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, param_dtype=param_dtype)
        self.mlp = SiglipMLP(cfg, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class SiglipEncoder(nnx.Module):
    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.layers = nnx.List(
            [SiglipEncoderLayer(cfg, rngs=rngs, param_dtype=param_dtype) for _ in range(cfg.num_hidden_layers)]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = layer(x)
        return x


class SiglipVisionTransformer(nnx.Module):
    """Pixels (B, C, H, W) -> `last_hidden_state` (B, N, D): embeddings, encoder, `post_layernorm`."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.embeddings = SiglipVisionEmbeddings(cfg, rngs=rngs, param_dtype=param_dtype)
        self.encoder = SiglipEncoder(cfg, rngs=rngs, param_dtype=param_dtype)
        self.post_layernorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, param_dtype=param_dtype)

    def __call__(self, pixel_values: jax.Array) -> jax.Array:
        return self.post_layernorm(self.encoder(self.embeddings(pixel_values)))


class SiglipVisionModel(nnx.Module):
    """Holds `vision_model`, as transformers 4.x's `SiglipVisionModel` does (the checkpoint's key level)."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.vision_model = SiglipVisionTransformer(cfg, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, pixel_values: jax.Array) -> jax.Array:
        return self.vision_model(pixel_values)


class Gemma3MultiModalProjector(nnx.Module):
    """(B, P * P, Dv) patch states -> (B, T * T, Dt) image tokens: a P / T average pool over the patch
    grid, the Gemma RMSNorm (`1 + weight`, eps `layer_norm_eps`), then `@ mm_input_projection_weight`
    (a raw (Dv, Dt) matrix, stored as it is used: no transpose on loading)."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.patches_per_side, self.tokens_per_side = cfg.patches_per_side, cfg.tokens_per_side
        shape = (cfg.hidden_size, cfg.text_hidden_size)
        self.mm_input_projection_weight = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), shape, param_dtype))
        self.mm_soft_emb_norm = Gemma3RMSNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, _, d = x.shape
        p, t = self.patches_per_side, self.tokens_per_side
        grid = x.astype(jnp.float32).reshape(
            b, t, p // t, t, p // t, d
        )  # (B, row block, row in block, col block, col in block, D)
        pooled = jnp.mean(grid, axis=(2, 4)).reshape(b, t * t, d).astype(x.dtype)
        normed = self.mm_soft_emb_norm(pooled)
        return (normed @ self.mm_input_projection_weight[...].astype(normed.dtype)).astype(x.dtype)


class Gemma3VisionTower(nnx.Module):
    """Pixel values (B, C, image_size, image_size) -> image tokens (B, mm_tokens_per_image, text_hidden_size),
    `Gemma3Model.get_image_features(pixel_values).pooler_output`."""

    def __init__(self, cfg: Gemma3VisionConfig, *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32) -> None:
        self.config = cfg
        self.vision_tower = SiglipVisionModel(cfg, rngs=rngs, param_dtype=param_dtype)
        self.multi_modal_projector = Gemma3MultiModalProjector(cfg, rngs=rngs, param_dtype=param_dtype)

    def __call__(self, pixel_values: jax.Array) -> jax.Array:
        cfg = self.config
        expected = (cfg.num_channels, cfg.image_size, cfg.image_size)
        if pixel_values.ndim != 4 or tuple(pixel_values.shape[1:]) != expected:
            raise ValueError(
                f"pixel_values has shape {tuple(pixel_values.shape)}; the vision tower takes (B, *{expected}): "
                "prepare images with gemma3_pixel_values at the config's image_size."
            )
        return self.multi_modal_projector(self.vision_tower(pixel_values))


_VISION_PARAM = r"((?:embeddings|encoder|post_layernorm)\..+)"
# Anchored source-key patterns -> (our prefix, group 1): transformers <= 4.51 (`vision_tower.vision_model.`),
# >= 4.52 (`model.vision_tower.vision_model.`) and 5.x (`vision_tower.` on disk, `model.vision_tower.` in memory).
GEMMA_VISION_KEY_MAP: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:model\.)?vision_tower\.(?:vision_model\.)?" + _VISION_PARAM), "vision_tower.vision_model."),
    (re.compile(r"(?:model\.)?multi_modal_projector\.(.+)"), "multi_modal_projector."),
)
# Keys of a multimodal Gemma 3 checkpoint that image features do not use: the text model, the LM head
# and the SigLIP pooling head (`vision_use_head`, whose output Gemma 3 discards).
GEMMA_VISION_IGNORED_KEYS: tuple[re.Pattern[str], ...] = (
    *GEMMA_TEXT_KEY_MAP,
    re.compile(r"(?:model\.)?language_model\..+"),
    re.compile(r"(?:language_model\.)?lm_head\.weight"),
    re.compile(r"(?:model\.)?vision_tower\.(?:vision_model\.)?head\..+"),
)
_SHOWN = 8


def gemma_vision_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A multimodal Gemma 3 checkpoint's image-path tensors renamed to `Gemma3VisionTower` paths.

    Raises `ValueError` listing the keys that no pattern (or more than one) matches, and the target
    keys that two source keys map to (two layouts mixed in one directory).
    """
    out: dict[str, Any] = {}
    unknown, ambiguous, duplicate = [], [], []
    for key, value in state_dict.items():
        hits = [prefix + m.group(1) for pattern, prefix in GEMMA_VISION_KEY_MAP if (m := pattern.fullmatch(key))]
        ignored = any(pattern.fullmatch(key) for pattern in GEMMA_VISION_IGNORED_KEYS)
        if not hits and not ignored:
            unknown.append(key)
        elif len(hits) > 1 or (hits and ignored):
            ambiguous.append(key)
        elif hits:
            if hits[0] in out:
                duplicate.append(hits[0])
            out[hits[0]] = value
    problems = [
        f"{len(items)} {label}: {', '.join(sorted(items)[:_SHOWN])}"
        for label, items in (("unknown keys", unknown), ("ambiguous keys", ambiguous), ("duplicated", duplicate))
        if items
    ]
    if problems:
        raise ValueError(
            "state_dict is not a multimodal Gemma 3 checkpoint this loader knows: "
            + "; ".join(problems)
            + f". Known image keys: {[p.pattern for p, _ in GEMMA_VISION_KEY_MAP]}; ignored: "
            f"{[p.pattern for p in GEMMA_VISION_IGNORED_KEYS]}."
        )
    return out


def load_gemma_vision_state_dict(
    model: Gemma3VisionTower, state_dict: Mapping[str, Any], mesh: Mesh | None = None, *, progress: bool = True
) -> Gemma3VisionTower:
    """Loads a Gemma 3 checkpoint's image-path tensors into `model` (real or abstract) in place.

    Strict like `load_gemma_state_dict`: unknown, missing or mis-shaped keys raise one `ValueError`
    before anything is placed. Tensors go to their devices split by `gemma_param_sharding` (or to the
    first device without a `mesh`), cast to the model's parameter dtype. Returns the model.
    """
    return place_gemma_tensors(
        model, gemma_vision_state_dict(state_dict), mesh,
        config_name="Gemma3VisionConfig", label="loading Gemma vision", progress=progress,
    )  # fmt: skip


def read_gemma_vision_config(gemma_root: str | Path) -> Gemma3VisionConfig:
    """`Gemma3VisionConfig` from the first `config.json` below `gemma_root` (as `read_gemma_config` finds it)."""
    return Gemma3VisionConfig.from_hf_dict(gemma_json(gemma_root, "config.json"))


def abstract_gemma_vision(cfg: Gemma3VisionConfig, param_dtype: jnp.dtype) -> Gemma3VisionTower:
    """`Gemma3VisionTower(cfg)` with shape-only parameters: one encoder layer traced, copied for the others."""
    one_layer = dataclasses.replace(cfg, num_hidden_layers=1)
    model = abstract_module(lambda rngs: Gemma3VisionTower(one_layer, rngs=rngs, param_dtype=param_dtype))
    encoder = model.vision_tower.vision_model.encoder
    encoder.layers = repeated(encoder.layers[0], cfg.num_hidden_layers)
    model.config = cfg
    return model


def create_gemma_vision(
    gemma_root: str | Path, *, param_dtype: jnp.dtype = jnp.bfloat16, mesh: Mesh | None = None
) -> Gemma3VisionTower:
    """The directory's Gemma 3 vision tower + projector, built without random init and loaded tensor by tensor."""
    model = abstract_gemma_vision(read_gemma_vision_config(gemma_root), param_dtype)
    return load_gemma_vision_state_dict(model, lazy_gemma_tensors(gemma_root), mesh)
