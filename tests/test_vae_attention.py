"""The video VAE's `attn` block (new in ltx-core 1.2.0) alone and inside a conv decoder, against 1.2.0 (fixture
recorded by tests/record_ltx25_fixtures.py)."""

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from flax import nnx
from ltx_core_twin import relative_error
from tolerances import FLOAT32

from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model.video_vae import video_decoder_from_config
from ltx_jax.model.video_vae.attention import AttnBlock3D
from ltx_jax.model.video_vae.model_configurator import vae_decoder_state_dict

RECORDED = np.load(Path(__file__).parent / "fixtures" / "ltx25" / "vae_attention.npz")


def weights(prefix: str) -> dict[str, np.ndarray]:
    return {k.removeprefix(prefix): RECORDED[k] for k in RECORDED.files if k.startswith(prefix)}


def test_attention_block_equals_ltx_core_1_2_0():
    """Per-frame single-head attention after the channel RMSNorm, odd frame and width counts."""
    block = AttnBlock3D(16, rngs=nnx.Rngs(0))
    load_state_dict(block, weights("block."), prefix="")
    assert relative_error(np.asarray(block(jnp.asarray(RECORDED["x"]))), RECORDED["y"]) <= FLOAT32


def test_a_decoder_with_an_attention_block_equals_ltx_core_1_2_0():
    """`decoder_blocks` naming `attn` builds it where upstream does, under upstream's keys."""
    config = {"vae": json.loads(str(RECORDED["config"]))}
    decoder = video_decoder_from_config(config, rngs=nnx.Rngs(0))
    tensors = {
        ("" if k.startswith("per_channel_statistics.") else "decoder.") + k: v for k, v in weights("decoder.").items()
    }
    load_state_dict(decoder, vae_decoder_state_dict(tensors), prefix="")
    assert relative_error(np.asarray(decoder(jnp.asarray(RECORDED["latent"]))), RECORDED["video"]) <= FLOAT32
