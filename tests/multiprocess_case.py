"""The model and inputs of the multi-process test, built identically in every process (numpy inputs)."""

import dataclasses

from flax import nnx
from ltx_core_twin import default_inputs

import ltx_jax

CFG = ltx_jax.LTXConfig.tiny(
    num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8, audio_attention_head_dim=4
)


def build_case(model_type: str, tokens: int) -> tuple[ltx_jax.LTXModel, ltx_jax.Modality, ltx_jax.Modality | None]:
    cfg = dataclasses.replace(CFG, model_type=model_type)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla")
    video, audio = default_inputs(cfg, batch=2, video_tokens=tokens)

    def host(inputs):  # numpy fields: every process passes the same host values
        fields = ("latent", "sigma", "timesteps", "positions", "context")
        return ltx_jax.Modality(**{f: getattr(inputs, f) for f in fields})

    return model, host(video), None if audio is None else host(audio)
