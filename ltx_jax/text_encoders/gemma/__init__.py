"""Prompt encoding: Gemma 3 (encoders/), its tokenizer, LTX's feature extractors, connectors and
embeddings processor, the end-to-end prompt encoder and its on-disk cache."""

from ltx_jax.text_encoders.gemma.embeddings_connector import (
    AudioEmbeddings1DConnectorConfigurator,
    Embeddings1DConnector,
    Embeddings1DConnectorConfigurator,
)
from ltx_jax.text_encoders.gemma.embeddings_processor import (
    EMBEDDINGS_PROCESSOR_KEY_MAP,
    VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_MAP,
    EmbeddingsProcessor,
    EmbeddingsProcessorConfigurator,
    EmbeddingsProcessorOutput,
    convert_to_additive_mask,
    embeddings_processor_state_dict,
)
from ltx_jax.text_encoders.gemma.encoders import (
    Gemma3ModelConfig,
    Gemma3TextModel,
    GemmaTextEncoder,
    create_gemma_model,
    load_gemma_state_dict,
    shard_gemma,
)
from ltx_jax.text_encoders.gemma.feature_extractor import FeatureExtractorV1, FeatureExtractorV2
from ltx_jax.text_encoders.gemma.prompt_cache import PromptCache, checkpoint_identity
from ltx_jax.text_encoders.gemma.prompt_encoder import PromptEncoder, build_prompt_encoder
from ltx_jax.text_encoders.gemma.tokenizer import TOKENIZER_MAX_LENGTH, LTXGemmaTokenizer

__all__ = [
    "EMBEDDINGS_PROCESSOR_KEY_MAP",
    "TOKENIZER_MAX_LENGTH",
    "VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_MAP",
    "AudioEmbeddings1DConnectorConfigurator",
    "Embeddings1DConnector",
    "Embeddings1DConnectorConfigurator",
    "EmbeddingsProcessor",
    "EmbeddingsProcessorConfigurator",
    "EmbeddingsProcessorOutput",
    "FeatureExtractorV1",
    "FeatureExtractorV2",
    "Gemma3ModelConfig",
    "Gemma3TextModel",
    "GemmaTextEncoder",
    "LTXGemmaTokenizer",
    "PromptCache",
    "PromptEncoder",
    "build_prompt_encoder",
    "checkpoint_identity",
    "convert_to_additive_mask",
    "create_gemma_model",
    "embeddings_processor_state_dict",
    "load_gemma_state_dict",
    "shard_gemma",
]
