"""Audio VAE encoder (mel spectrogram -> normalized latent) against ltx-core 1.0.0 (CPU, float32 and bf16).

Both sides are built from the same checkpoint-style `config` by their configurators; ltx-core's random
weights reach ours through checkpoint keys, `audio_encoder_state_dict` and the strict `load_state_dict`.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core_twin import relative_error
from tolerances import BF16, FLOAT32
from torchaudio_stand_in import torchaudio_stand_in

import ltx_jax
from ltx_jax.model import audio_vae as ours

with torchaudio_stand_in():
    from ltx_core.model.audio_vae import AudioEncoderConfigurator

BRANCH_EFFECT = 1e-3  # perturbing a weight that matters moves the output by far more than the tolerance

ENCODER = {  # ch = 2 kept channels x 16 latent mel bins, as the per-channel statistics require
    "ch": 32,
    "ch_mult": [1, 1, 2],
    "num_res_blocks": 1,
    "attn_resolutions": [16, 4],  # running resolutions 16, 8, 4: attention in the first and last stage
    "resolution": 16,
    "z_channels": 2,
    "in_channels": 2,
    "norm_type": "pixel",
    "causality_axis": "height",
    "mel_bins": 64,
}
# name: (ddconfig overrides, spectrogram time steps); no time is a multiple of 4 but one.
ENCODERS = {
    "causal_height": ({}, 13),
    "causal_width_no_mid_attention": ({"causality_axis": "width", "mid_block_add_attention": False}, 11),
    "width_compatibility_attn_type_none": ({"causality_axis": "width-compatibility", "attn_type": "none"}, 12),
    "group_norm_non_causal": ({"causality_axis": None, "norm_type": "group", "num_res_blocks": 2}, 14),
    "average_pooling": ({"causality_axis": None, "resamp_with_conv": False, "attn_resolutions": [8]}, 15),
    # Without double_z, ltx-core still keeps the first half of the channels: 4 -> 2.
    "single_z": ({"double_z": False, "z_channels": 4}, 10),
}


def encoder_config(**overrides) -> dict:
    return {"audio_vae": {"model": {"params": {"ddconfig": {**ENCODER, **overrides}}}}}


def randomize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Positive std and nonzero mean statistics (1.0.0 leaves them `torch.empty`), random norm affines; the
    convolutions keep their random init, so every weight moves the output."""
    gen = torch.Generator().manual_seed(seed)
    for key, value in module.state_dict().items():
        if key.endswith("std-of-means"):
            value.copy_(0.5 + torch.rand(value.shape, generator=gen))
        elif key.endswith("mean-of-means"):
            value.copy_(0.3 * torch.randn(value.shape, generator=gen))
        elif "norm" in key:
            value.add_(0.3 * torch.randn(value.shape, generator=gen))
    return module.eval()


def checkpoint(module: torch.nn.Module) -> dict:
    """The tensors an official file holds for the encoder, plus other components' (which the selection drops)."""
    tensors = {
        ("audio_vae." if k.startswith("per_channel_statistics.") else "audio_vae.encoder.") + k: v
        for k, v in module.state_dict().items()
    }
    tensors["audio_vae.decoder.conv_in.conv.weight"] = torch.ones(2, 2)
    tensors["model.diffusion_model.patchify_proj.weight"] = torch.ones(2, 2)
    return tensors


def encoder_pair(config: dict, param_dtype: jnp.dtype = jnp.float32) -> tuple[torch.nn.Module, ours.AudioEncoder]:
    """ltx-core's encoder with random weights, and ours built abstractly and filled by the strict load."""
    torch.manual_seed(0)  # the convolutions' initial values, which `randomize` adds to
    reference = randomize(AudioEncoderConfigurator.from_config(config), seed=0)
    model = nnx.eval_shape(lambda: ours.audio_encoder_from_config(config, rngs=nnx.Rngs(0), param_dtype=param_dtype))
    ltx_jax.load_state_dict(model, ours.audio_encoder_state_dict(checkpoint(reference)), prefix="")
    return reference, model


def spectrogram(time: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 2, time, 64)).astype(np.float32)


def run_both(reference: torch.nn.Module, model: ours.AudioEncoder, x: np.ndarray, dtype: jnp.dtype = jnp.float32):
    with torch.no_grad():
        expected = reference(torch.from_numpy(x))
    got = nnx.jit(lambda m, v: m(v))(model, jnp.asarray(x, dtype))
    assert got.dtype == dtype
    assert got.shape == tuple(expected.shape)
    return np.asarray(got.astype(jnp.float32)), expected


@pytest.mark.parametrize("name", ENCODERS)
def test_audio_encoder_matches_ltx_core(name: str) -> None:
    overrides, time = ENCODERS[name]
    reference, model = encoder_pair(encoder_config(**overrides))
    got, expected = run_both(reference, model, spectrogram(time))
    # Downsampling rounds up along a causal time axis, down otherwise; 64 mel bins -> 16.
    frames = -(-time // 4) if overrides.get("causality_axis", "height") == "height" else time // 4
    assert got.shape == (1, 2, frames, 16)
    error = relative_error(got, expected)
    assert error <= FLOAT32, f"relative error {error:.2e}"


def test_bfloat16_within_tolerance_of_float32_reference() -> None:
    reference, model = encoder_pair(encoder_config(), param_dtype=jnp.bfloat16)
    got, expected = run_both(reference, model, spectrogram(10), dtype=jnp.bfloat16)
    error = relative_error(got, expected)
    assert error <= BF16, f"relative error {error:.2e}"


MEL_FRONT_ENDS = {  # name: (audio_vae sections besides the model, sampling_rate, expected front end)
    "defaults": ({}, None, (16000, 160, 1024, 64)),
    "custom": (
        {"preprocessing": {"stft": {"filter_length": 512, "hop_length": 80}, "mel": {"n_mel_channels": 48}}},
        24000,
        (24000, 80, 512, 48),
    ),
}


@pytest.mark.parametrize("name", MEL_FRONT_ENDS)
def test_config_attributes_for_the_mel_front_end(name: str) -> None:
    """The attributes a mel front end is built from, read from the same keys with the same defaults."""
    sections, sampling_rate, expected = MEL_FRONT_ENDS[name]
    config = encoder_config(mel_bins=None if sections else 64)
    config["audio_vae"].update(sections)
    if sampling_rate is not None:
        config["audio_vae"]["model"]["params"]["sampling_rate"] = sampling_rate
    model = nnx.eval_shape(lambda: ours.audio_encoder_from_config(config, rngs=nnx.Rngs(0)))
    reference = AudioEncoderConfigurator.from_config(config)
    for attr in ("sample_rate", "mel_hop_length", "n_fft", "mel_bins", "in_channels", "z_channels", "is_causal"):
        assert getattr(model, attr) == getattr(reference, attr), attr
    assert (model.sample_rate, model.mel_hop_length, model.n_fft, model.mel_bins) == expected


WEIGHTS_THAT_MATTER = [
    "per_channel_statistics.std-of-means",
    "per_channel_statistics.mean-of-means",
    "conv_in.conv.weight",
    "down.0.attn.0.k.weight",
    "down.1.downsample.conv.weight",
    "down.2.block.0.nin_shortcut.conv.weight",
    "mid.attn_1.proj_out.weight",
    "conv_out.conv.bias",
]


def test_weights_matter() -> None:
    """Perturbing each listed parameter or buffer moves the output, so the parity tests can fail."""
    _, model = encoder_pair(encoder_config())
    graphdef, state = nnx.split(model)
    x = jnp.asarray(spectrogram(10))
    run = nnx.jit(lambda s: nnx.merge(graphdef, s)(x))
    base = np.asarray(run(state))
    for key in WEIGHTS_THAT_MATTER:
        flat = nnx.to_flat_state(state)
        flat = [(p, v.replace(v.get_value() * 1.5 + 0.1) if ".".join(map(str, p)) == key else v) for p, v in flat]
        assert sum(".".join(map(str, p)) == key for p, _ in flat) == 1, key
        assert relative_error(np.asarray(run(nnx.from_flat_state(flat))), base) > BRANCH_EFFECT, key


def test_load_is_strict() -> None:
    reference, model = encoder_pair(encoder_config())
    state = ours.audio_encoder_state_dict(checkpoint(reference))
    assert not any(k.startswith(("audio_vae.", "model.")) for k in state)
    key = "down.1.downsample.conv.bias"
    with pytest.raises(ValueError, match=rf"1 missing keys: {key}\."):
        ltx_jax.load_state_dict(model, {k: v for k, v in state.items() if k != key}, prefix="")
    with pytest.raises(ValueError, match=r"unexpected keys: .*audio_vae\.decoder"):  # the whole file, unselected
        ltx_jax.load_state_dict(model, checkpoint(reference), prefix="audio_vae.encoder.")


def test_bad_inputs_and_configs_raise() -> None:
    _, model = encoder_pair(encoder_config())
    with pytest.raises(ValueError, match=r"\(batch, 2, time, mel_bins\)"):
        model(jnp.zeros((1, 1, 10, 64)))
    with pytest.raises(ValueError, match=r"\(batch, 2, time, mel_bins\)"):
        model(jnp.zeros((2, 10, 64)))
    with pytest.raises(ValueError, match=r"mel bins encode to 16 \(the config's mel_bins: 64\)"):
        nnx.eval_shape(lambda m, x: m(x), model, jnp.zeros((1, 2, 10, 32)))  # raised while tracing: no run needed
    with pytest.raises(ValueError, match="cannot be causal"):
        ours.audio_encoder_from_config(encoder_config(resamp_with_conv=False), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"attn_type is 'flash'"):
        ours.audio_encoder_from_config(encoder_config(attn_type="flash"), rngs=nnx.Rngs(0))
