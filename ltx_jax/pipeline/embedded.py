"""The embedded default of `scripts/generate.py`: a tiny model with random weights, built through
the same configurators as a real checkpoint (`EMBEDDED_CONFIG` is a checkpoint `config` dict), and
a tiny random Gemma 3 with a byte-level tokenizer as its text encoder.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jax.numpy as jnp
from flax import nnx
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from ltx_jax.config import LTXConfig
from ltx_jax.model import audio_vae, upsampler, video_vae
from ltx_jax.model.model import LTXModel
from ltx_jax.pipeline import flows
from ltx_jax.pipeline.components import (
    PipelineModels,
    Upsampling,
    audio_encoder_callable,
    conditioning_encoders,
    decoder_modules,
    geometry,
)
from ltx_jax.pipeline.decoders import decoder_callables
from ltx_jax.pipeline.flows import Flow
from ltx_jax.pipeline.requests import Components
from ltx_jax.text_encoders.gemma import (
    EmbeddingsProcessorConfigurator,
    Gemma3ModelConfig,
    Gemma3TextModel,
    GemmaTextEncoder,
    LTXGemmaTokenizer,
    PromptEncoder,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_image_processor import Gemma3ImageConfig
from ltx_jax.text_encoders.gemma.encoders.gemma3_vision import Gemma3VisionConfig, Gemma3VisionTower
from ltx_jax.text_encoders.gemma.prompt_enhancer import ChatFormat, ImageTokens, PromptEnhancer, VisionInputs

EMBEDDED_WEIGHTS_SEED = 10  # the weights of `scripts/generate.py` without a checkpoint
_TINY_DIT = LTXConfig.tiny(
    num_layers=2,
    num_attention_heads=8,
    attention_head_dim=8,
    audio_num_attention_heads=8,
    audio_attention_head_dim=4,
    audio_in_channels=32,  # 2 audio latent channels x 16 latent mel bins
    audio_out_channels=32,
)
_CONNECTORS = {  # the 2.3 text path (V2 feature extractor), connectors as wide as the DiT's contexts
    "caption_projection_first_linear": False,
    "caption_proj_input_norm": False,
    "caption_projection_second_linear": False,
    "connector_num_attention_heads": 8,
    "connector_attention_head_dim": 8,
    "audio_connector_num_attention_heads": 8,
    "audio_connector_attention_head_dim": 4,
    "connector_num_layers": 1,
    "connector_positional_embedding_max_pos": [4096],
}
EMBEDDED_CONFIG: dict[str, Any] = {
    "transformer": {**_TINY_DIT.to_metadata()["transformer"], **_CONNECTORS},
    "vae": {  # LTX-2.3's decoder recipe, 4 base channels: 32x32 spatial and 8x temporal compression
        "latent_channels": 16,
        "patch_size": 4,
        "decoder_base_channels": 4,
        "spatial_padding_mode": "zeros",
        "timestep_conditioning": False,
        "encoder_blocks": [
            ["compress_space_res", {"multiplier": 2}],
            ["compress_time_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 2}],
            ["compress_all", 1],
        ],
        "decoder_blocks": [
            ["res_x", {"num_layers": 1}],
            ["compress_space", {"multiplier": 2}],
            ["compress_time", {"multiplier": 2}],
            ["compress_all", {"multiplier": 1}],
            ["compress_all", {"multiplier": 2}],
            ["res_x", {"num_layers": 1}],
        ],
    },  # fmt: skip
    "audio_vae": {
        "model": {
            "params": {
                "ddconfig": {
                    "ch": 32,
                    "out_ch": 2,
                    "ch_mult": [1, 1, 2],
                    "num_res_blocks": 1,
                    "attn_resolutions": [],
                    "resolution": 16,
                    "z_channels": 2,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                    "mel_bins": 64,
                }  # fmt: skip
            }
        }
    },
    "vocoder": {  # HiFi-GAN: 8 * 6 * 5 = 240 samples per 10 ms mel frame -> 24 kHz
        "resblock": "1",
        "stereo": True,
        "upsample_initial_channel": 16,
        "upsample_rates": [8, 6, 5],
        "upsample_kernel_sizes": [16, 12, 10],
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1, 3, 5]],
        "output_sampling_rate": 24000,
    },  # fmt: skip
}
EMBEDDED_UPSAMPLER = {"in_channels": 16, "mid_channels": 32, "num_blocks_per_stage": 1}


# 4 Gemma layers (3 sliding-window, 1 global) over a byte-level vocabulary and Gemma's chat and image
# tokens; 128 tokens: the connectors' 128 learnable registers need a multiple of 128.
EMBEDDED_GEMMA = Gemma3ModelConfig(
    vocab_size=272, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    query_pre_attn_scalar=8, rms_norm_eps=1e-6, sliding_window=16,
    layer_types=("sliding_attention", "sliding_attention", "sliding_attention", "full_attention"),
    rope_theta=1e6, rope_local_base_freq=1e4, rope_scaling_factor=8.0,
)  # fmt: skip
EMBEDDED_MAX_LENGTH = 128
_SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>")
# Ids 260.. after the 256 bytes; Gemma 3's own ids differ (106 is <end_of_turn>), its names do not.
_CHAT_TOKENS = ("<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>")
_NAMED_TOKENS = {
    "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
    "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>",
}  # fmt: skip
# Gemma 3's chat format: the system message opens the first user turn; an image is <start_of_image>.
GEMMA3_CHAT_TEMPLATE = """{{ bos_token }}
{%- set system = messages[0]['content'] if messages[0]['role'] == 'system' else none -%}
{%- if system is not none and system is not string %}{% set system = system[0]['text'] %}{% endif -%}
{%- for message in (messages[1:] if system is not none else messages) -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{ '<start_of_turn>' + role + '\n' }}{% if loop.first and system is not none %}{{ system + '\n\n' }}{% endif -%}
{%- if message['content'] is string %}{{ message['content'] | trim }}{% else -%}
{%- for item in message['content'] -%}
{%- if item['type'] == 'image' %}{{ '<start_of_image>' }}{% endif -%}
{%- if item['type'] == 'text' %}{{ item['text'] | trim }}{% endif -%}
{%- endfor %}{% endif -%}
{{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif -%}
"""
EMBEDDED_CHAT = ChatFormat(
    GEMMA3_CHAT_TEMPLATE,
    _NAMED_TOKENS,
    stop_token_ids=(1, 261),  # <eos>, <end_of_turn>
    image_tokens=ImageTokens("<start_of_image>", "<image_soft_token>", "<end_of_image>", count=4),
)
# A tiny SigLIP tower and projector: 32 x 32 pixels in 8 x 8 patches, pooled to the 4 image tokens.
EMBEDDED_GEMMA_VISION = Gemma3VisionConfig(
    hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_channels=3,
    image_size=32, patch_size=8, layer_norm_eps=1e-6, mm_tokens_per_image=4, text_hidden_size=32,
)  # fmt: skip


def byte_tokenizer(max_length: int = EMBEDDED_MAX_LENGTH) -> LTXGemmaTokenizer:
    """Gemma's special tokens and one token per UTF-8 byte (BPE without merges, byte fallback), then
    its chat and image tokens."""
    vocab = {token: i for i, token in enumerate(_SPECIALS)}
    vocab.update({f"<0x{byte:02X}>": len(_SPECIALS) + byte for byte in range(256)})
    tokenizer = Tokenizer(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    tokenizer.add_special_tokens([*_SPECIALS, *_CHAT_TOKENS])
    return LTXGemmaTokenizer(tokenizer, _NAMED_TOKENS, max_length)


def embedded_prompt_encoder(config: dict[str, Any], seed: int) -> PromptEncoder:
    """Text -> bytes -> tiny random Gemma 3 -> V2 feature extractor -> connectors -> DiT contexts."""
    gemma = Gemma3TextModel(EMBEDDED_GEMMA, rngs=nnx.Rngs(seed + 5))
    processor = EmbeddingsProcessorConfigurator.from_config(
        config,
        embedding_dim=EMBEDDED_GEMMA.hidden_size,
        num_layers=EMBEDDED_GEMMA.num_hidden_layers + 1,
        rngs=nnx.Rngs(seed + 6),
    )
    text_encoder = GemmaTextEncoder(gemma, byte_tokenizer())
    vision = VisionInputs(
        lambda: Gemma3VisionTower(EMBEDDED_GEMMA_VISION, rngs=nnx.Rngs(seed + 8)),
        Gemma3ImageConfig(image_size=EMBEDDED_GEMMA_VISION.image_size),
    )
    enhancer = functools.partial(PromptEnhancer, gemma, text_encoder.tokenizer, EMBEDDED_CHAT, vision=vision)
    return PromptEncoder(text_encoder, processor, make_enhancer=enhancer)


def embedded_models(flow: str | Flow, seed: int = EMBEDDED_WEIGHTS_SEED) -> PipelineModels:
    """The tiny random-weight models of `flow`, their weights drawn from `seed`."""
    flow = flows.get(flow)
    config = json.loads(json.dumps(EMBEDDED_CONFIG))
    model = LTXModel(flow.dit_config(LTXConfig.from_metadata(config)), rngs=nnx.Rngs(seed))
    video_decoder, audio_decoder, vocoder = decoder_modules(config, None, seed, jnp.float32, video=not flow.audio_only)
    decode_video, decode_audio = decoder_callables(video_decoder, audio_decoder, vocoder)
    upsample = None
    if flow.needs.upsampler:  # built only when used: random init of each module takes seconds on CPU
        up = upsampler.LatentUpsamplerConfigurator.from_config(EMBEDDED_UPSAMPLER, rngs=nnx.Rngs(seed + 4))
        upsample = Upsampling(up, video_decoder)

    encode_audio = None
    if flow.needs.audio_encoder:
        build = functools.partial(audio_vae.audio_encoder_from_config, config, rngs=nnx.Rngs(seed + 7))
        encode_audio = audio_encoder_callable(build, jnp.float32)
    components = Components(
        model,
        geometry(config),
        jnp.float32,
        upsample=upsample,
        encode_audio=encode_audio,
        **({} if flow.audio_only else conditioning_encoders(
            lambda: video_vae.video_encoder_from_config(config, rngs=nnx.Rngs(seed + 3)), jnp.float32
        )),
    )  # fmt: skip
    return PipelineModels(
        components=components,
        decode_video=decode_video,
        decode_audio=decode_audio,
        prompt_encoder=embedded_prompt_encoder(config, seed),
        defaults=flow.defaults("embedded"),
        description="embedded tiny model with RANDOM weights (pass a checkpoint for a real one)",
    )
