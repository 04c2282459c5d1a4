"""LTX's text-side modules over Gemma hidden states: feature extractors, connectors, the processor."""

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
from ltx_jax.text_encoders.gemma.feature_extractor import FeatureExtractorV1, FeatureExtractorV2

__all__ = [
    "EMBEDDINGS_PROCESSOR_KEY_MAP",
    "VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_MAP",
    "AudioEmbeddings1DConnectorConfigurator",
    "Embeddings1DConnector",
    "Embeddings1DConnectorConfigurator",
    "EmbeddingsProcessor",
    "EmbeddingsProcessorConfigurator",
    "EmbeddingsProcessorOutput",
    "FeatureExtractorV1",
    "FeatureExtractorV2",
    "convert_to_additive_mask",
    "embeddings_processor_state_dict",
]
