"""Audio decoder, HiFi-GAN / BigVGAN(+BWE) vocoders and `decode_audio` against ltx-core 1.0.0 (CPU, float32).

Both sides are built from the same checkpoint-style `config` by their configurators; ltx-core's random
weights reach ours through checkpoint keys, the key selections and the strict `load_state_dict`.
"""

import pathlib
import re

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core_twin import relative_error
from tolerances import FLOAT32
from torchaudio_stand_in import torchaudio_stand_in

import ltx_jax
from ltx_jax.model import audio_vae as ours

with torchaudio_stand_in():
    from ltx_core.model.audio_vae import AudioDecoderConfigurator, AudioProcessor, VocoderConfigurator
    from ltx_core.model.audio_vae import decode_audio as torch_decode_audio
    from ltx_core.model.audio_vae.model_configurator import _vocoder_from_config as torch_vocoder_from_config
    from ltx_core.model.audio_vae.vocoder import DownSample1d as TorchDownSample1d
    from ltx_core.model.audio_vae.vocoder import UpSample1d as TorchUpSample1d

DOCS = pathlib.Path(__file__).parents[1] / "docs" / "audio.md"
BRANCH_EFFECT = 1e-3  # perturbing a weight that matters moves the output by far more than the tolerance

# The HiFi-GAN config has an even resblock kernel on purpose; torch warns that "same" padding copies then.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

DECODER = {  # ch = z_channels * latent mel bins (16), as the per-channel statistics require
    "ch": 32,
    "out_ch": 2,
    "ch_mult": [1, 1, 2],
    "num_res_blocks": 1,
    "attn_resolutions": [4, 16],  # running resolutions 4, 8, 16: attention in the first and last stage
    "resolution": 16,
    "z_channels": 2,
    "norm_type": "pixel",
    "causality_axis": "height",
    "mel_bins": 64,
}
DECODERS = {
    "causal_height": {},
    "causal_width_no_mid_attention": {"causality_axis": "width", "mid_block_add_attention": False},
    "width_compatibility": {"causality_axis": "width-compatibility", "attn_resolutions": []},
    "group_norm_non_causal": {"causality_axis": None, "norm_type": "group", "mel_bins": None},
}
HIFI_GAN = {
    "resblock": "1",
    "stereo": True,
    "upsample_initial_channel": 16,
    "upsample_rates": [2, 3],
    "upsample_kernel_sizes": [4, 7],
    "resblock_kernel_sizes": [3, 4],  # an even kernel: torch's "same" padding puts the odd pad on the right
    "resblock_dilation_sizes": [[1, 3, 5], [1, 2, 3]],
}
BIGVGAN = {  # AMP blocks pad symmetrically, so their kernels must be odd
    **HIFI_GAN,
    "resblock": "AMP1",
    "activation": "snakebeta",
    "use_tanh_at_final": False,
    "resblock_kernel_sizes": [3],
    "resblock_dilation_sizes": [[1, 3, 5]],
}
BWE = {
    "vocoder": BIGVGAN,
    "bwe": {
        **BIGVGAN,
        "upsample_rates": [3, 4],  # multiply to hop_length * 48000 / 16000
        "upsample_kernel_sizes": [7, 8],
        "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
        "n_fft": 16,
        "hop_length": 4,
        "num_mels": 64,
    },
}
VOCODERS = {"hifi_gan": HIFI_GAN, "bigvgan_bwe": BWE}


def decoder_config(**overrides) -> dict:
    return {"audio_vae": {"model": {"params": {"ddconfig": {**DECODER, **overrides}}}}}


def randomize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random values for everything ltx-core initializes to constants (norm affines, Snake, statistics,
    STFT/mel bases); kaiser filters keep their computed values, convolutions their random init."""
    gen = torch.Generator().manual_seed(seed)
    state = module.state_dict()
    for key, value in state.items():
        noise = torch.randn(value.shape, generator=gen)
        if key.endswith("std-of-means"):
            value.copy_(0.5 + torch.rand(value.shape, generator=gen))
        elif key.endswith("mean-of-means"):  # torch.empty in 1.0.0: overwrite, never add to, its garbage
            value.copy_(0.3 * noise)
        elif key.endswith("mel_basis"):
            value.copy_(torch.rand(value.shape, generator=gen))
        elif key.endswith("_basis"):
            value.copy_(noise / value.shape[-1] ** 0.5)
        elif not key.endswith(".filter"):
            value.add_(0.3 * noise if key.endswith(("alpha", "beta")) or "norm" in key else 0.05 * noise)
    return module.eval()


def checkpoint(module: torch.nn.Module, prefix: str) -> dict:
    """The tensors an official file holds for `module`, plus other components' (the decoder's statistics sit
    under `audio_vae.per_channel_statistics.`, its other weights under `audio_vae.decoder.`)."""
    tensors = {
        ("audio_vae." if k.startswith("per_channel_statistics.") else prefix) + k: v
        for k, v in module.state_dict().items()
    }
    tensors["audio_vae.encoder.conv_in.conv.weight"] = torch.ones(2, 2)
    tensors["model.diffusion_model.patchify_proj.weight"] = torch.ones(2, 2)
    return tensors


# Our modules are built abstractly (`nnx.eval_shape`, no random init to compile) and filled by the strict
# load, which sets every parameter and buffer.


def decoder_pair(config: dict) -> tuple[torch.nn.Module, ours.AudioDecoder]:
    torch.manual_seed(0)  # as in vocoder_pair
    reference = randomize(AudioDecoderConfigurator.from_config(config), seed=0)
    model = nnx.eval_shape(lambda: ours.audio_decoder_from_config(config, rngs=nnx.Rngs(0)))
    files = checkpoint(reference, "audio_vae.decoder.")
    ltx_jax.load_state_dict(model, ours.audio_decoder_state_dict(files), prefix="")
    return reference, model


def vocoder_pair(vocoder_cfg: dict) -> tuple[torch.nn.Module, ours.Vocoder | ours.VocoderWithBWE]:
    config = {"vocoder": vocoder_cfg}
    torch.manual_seed(1)  # the convolutions' initial values: unseeded, they depended on the tests run before
    reference = randomize(VocoderConfigurator.from_config(config), seed=1)
    model = nnx.eval_shape(lambda: ours.vocoder_from_config(config, rngs=nnx.Rngs(0)))
    ltx_jax.load_state_dict(model, ours.vocoder_state_dict(checkpoint(reference, "vocoder.")), prefix="")
    return reference, model


def run_both(reference: torch.nn.Module, model: nnx.Module, x: np.ndarray) -> tuple[np.ndarray, torch.Tensor]:
    with torch.no_grad():
        expected = reference(torch.from_numpy(x))
    return np.asarray(nnx.jit(lambda m, v: m(v))(model, jnp.asarray(x))), expected


def assert_parity(got: np.ndarray, expected: torch.Tensor) -> None:
    assert got.shape == tuple(expected.shape)
    error = relative_error(got, expected)
    assert error <= FLOAT32, f"relative error {error:.2e}"


def inputs(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", DECODERS)
def test_audio_decoder_matches_ltx_core(name: str) -> None:
    reference, model = decoder_pair(decoder_config(**DECODERS[name]))
    got, expected = run_both(reference, model, inputs((2, 2, 3, 16)))
    assert_parity(got, expected)


@pytest.mark.parametrize("name", VOCODERS)
def test_vocoder_matches_ltx_core(name: str) -> None:
    reference, model = vocoder_pair(VOCODERS[name])
    got, expected = run_both(reference, model, inputs((2, 2, 5, 64)))
    assert_parity(got, expected)
    # Clipping at +-1 must not hide the comparison.
    assert np.mean(np.abs(got) < 1) > 0.5


def test_bigvgan_with_snake_matches_ltx_core() -> None:
    """`Vocoder(resblock="AMP1", activation="snake")`: plain Snake in the blocks (SnakeBeta after them)."""
    cfg = {**BIGVGAN, "activation": "snake"}
    reference = randomize(torch_vocoder_from_config(cfg), seed=2)
    model = nnx.eval_shape(
        lambda: ours.model_configurator._vocoder_from_config(cfg, rngs=nnx.Rngs(0), param_dtype=jnp.float32)
    )
    ltx_jax.load_state_dict(model, reference.state_dict(), prefix="")
    got, expected = run_both(reference, model, inputs((1, 2, 4, 64)))
    assert_parity(got, expected)


def test_decode_audio_matches_ltx_core() -> None:
    """Decoder + BigVGAN/BWE end to end (decoder + HiFi-GAN: the docs example below)."""
    decoder_ref, decoder = decoder_pair(decoder_config())
    vocoder_ref, vocoder = vocoder_pair(BWE)
    latent = inputs((1, 2, 3, 16))
    with torch.no_grad():
        expected = torch_decode_audio(torch.from_numpy(latent), decoder_ref, vocoder_ref)
    got = nnx.jit(ours.decode_audio)(jnp.asarray(latent), decoder, vocoder)
    assert got.sampling_rate == expected.sampling_rate == 48000
    assert_parity(np.asarray(got.waveform), expected.waveform)


def test_docs_audio_example_runs() -> None:
    """docs/audio.md's loading example, on a one-file checkpoint of a tiny decoder and HiFi-GAN."""
    config = {**decoder_config(), "vocoder": HIFI_GAN}
    decoder_ref = randomize(AudioDecoderConfigurator.from_config(config), seed=0)
    vocoder_ref = randomize(VocoderConfigurator.from_config(config), seed=1)
    tensors = {**checkpoint(decoder_ref, "audio_vae.decoder."), **checkpoint(vocoder_ref, "vocoder.")}
    latent = inputs((1, 2, 3, 16))
    (block,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)
    namespace = {"config": config, "tensors": tensors, "latent": jnp.asarray(latent)}
    exec(compile(block, str(DOCS), "exec"), namespace)  # noqa: S102 - our own docs
    with torch.no_grad():
        expected = torch_decode_audio(torch.from_numpy(latent), decoder_ref, vocoder_ref)
    assert namespace["audio"].sampling_rate == expected.sampling_rate == 24000
    assert_parity(np.asarray(namespace["audio"].waveform), expected.waveform)


WEIGHTS_THAT_MATTER = {
    "decoder": [
        "per_channel_statistics.std-of-means",
        "per_channel_statistics.mean-of-means",
        "mid.attn_1.proj_out.weight",
        "up.0.attn.1.k.weight",
        "up.1.upsample.conv.conv.weight",
        "conv_out.conv.bias",
    ],
    "hifi_gan": ["conv_pre.weight", "ups.1.weight", "resblocks.3.convs1.2.weight", "conv_post.bias"],
    "bigvgan_bwe": [
        "vocoder.resblocks.0.acts1.0.act.alpha",
        "vocoder.resblocks.1.acts2.2.act.beta",
        "vocoder.act_post.upsample.filter",
        "bwe_generator.resblocks.1.acts1.0.downsample.lowpass.filter",
        "bwe_generator.conv_post.weight",
        "mel_stft.mel_basis",
        "mel_stft.stft_fn.forward_basis",
    ],
}


@pytest.mark.parametrize("name", WEIGHTS_THAT_MATTER)
def test_weights_matter(name: str) -> None:
    """Perturbing each listed parameter or buffer moves the output, so the parity tests can fail."""
    if name == "decoder":
        _, model = decoder_pair(decoder_config())
        x = jnp.asarray(inputs((1, 2, 3, 16)))
    else:
        _, model = vocoder_pair(VOCODERS[name])
        x = jnp.asarray(inputs((1, 2, 5, 64)))
    graphdef, state = nnx.split(model)
    run = nnx.jit(lambda s: nnx.merge(graphdef, s)(x))
    base = np.asarray(run(state))
    for key in WEIGHTS_THAT_MATTER[name]:
        flat = nnx.to_flat_state(state)
        flat = [(p, v.replace(v.get_value() * 1.5 + 0.1) if ".".join(map(str, p)) == key else v) for p, v in flat]
        assert sum(".".join(map(str, p)) == key for p, _ in flat) == 1, key
        assert relative_error(np.asarray(run(nnx.from_flat_state(flat))), base) > BRANCH_EFFECT, key


def test_anti_aliasing_filters_match_ltx_core_init() -> None:
    """Freshly built kaiser filters (checkpoint buffers) and the computed Hann resampler equal ltx-core's."""
    for ratio, kernel_size in ((2, 12), (3, None)):
        up, down = ours.anti_alias.UpSample1d(ratio, kernel_size), ours.anti_alias.DownSample1d(ratio, kernel_size)
        assert relative_error(up.filter[...], TorchUpSample1d(ratio, kernel_size).filter) <= FLOAT32
        expected = TorchDownSample1d(ratio, kernel_size).lowpass.filter
        assert relative_error(down.lowpass.filter[...], expected) <= FLOAT32
    hann = TorchUpSample1d(ratio=3, persistent=False, window_type="hann").filter
    assert relative_error(ours.anti_alias.hann_sinc_filter1d(3), hann) <= FLOAT32


@pytest.mark.parametrize(("stride", "padding", "groups"), [(1, 0, 1), (3, 2, 1), (2, 1, 4)])
def test_conv_transpose_1d_matches_torch(stride: int, padding: int, groups: int) -> None:
    x, weight, bias = (
        inputs((2, 8, 7), 0),
        inputs((8, 6 // 2 * (groups == 4) + 5 * (groups == 1), 5), 1),
        inputs((0,), 2),
    )
    del bias
    expected = torch.nn.functional.conv_transpose1d(
        torch.from_numpy(x), torch.from_numpy(weight), stride=stride, padding=padding, groups=groups
    )
    got = ours.conv_transpose_1d(jnp.asarray(x), jnp.asarray(weight), stride=stride, padding=padding, groups=groups)
    assert_parity(np.asarray(got), expected)


def test_load_is_strict() -> None:
    reference, _ = vocoder_pair(HIFI_GAN)
    state = ours.vocoder_state_dict(checkpoint(reference, "vocoder."))
    config = {"vocoder": {**HIFI_GAN, "use_bias_at_final": False}}
    no_bias = nnx.eval_shape(lambda: ours.vocoder_from_config(config, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match=r"1 unexpected keys: conv_post\.bias\."):
        ltx_jax.load_state_dict(no_bias, state, prefix="")
    bwe_reference, bwe = vocoder_pair(BWE)
    bwe_state = ours.vocoder_state_dict(checkpoint(bwe_reference, "vocoder."))
    filter_key = "bwe_generator.resblocks.0.acts2.1.downsample.lowpass.filter"
    with pytest.raises(ValueError, match=rf"1 missing keys: {filter_key}\."):
        ltx_jax.load_state_dict(bwe, {k: v for k, v in bwe_state.items() if k != filter_key}, prefix="")
    with pytest.raises(
        ValueError, match=r"wrong shapes: mel_stft\.mel_basis: checkpoint \(32, 9\), model expects \(64, 9\)"
    ):
        ltx_jax.load_state_dict(bwe, {**bwe_state, "mel_stft.mel_basis": torch.zeros(32, 9)}, prefix="")
    with pytest.raises(ValueError, match=r"unexpected keys: audio_vae\.encoder"):  # the whole file, unselected
        ltx_jax.load_state_dict(bwe, checkpoint(bwe_reference, "vocoder."), prefix="vocoder.")


def test_bad_inputs_and_configs_raise() -> None:
    _, decoder = decoder_pair(decoder_config())
    with pytest.raises(ValueError, match="mel bins"):
        decoder(jnp.zeros((1, 2, 3, 8)))
    with pytest.raises(ValueError, match=r"\(batch, 2, frames"):
        decoder(jnp.zeros((1, 3, 3, 16)))
    _, vocoder = vocoder_pair(HIFI_GAN)
    with pytest.raises(ValueError, match="stereo mel"):
        vocoder(jnp.zeros((1, 5, 64)))
    with pytest.raises(ValueError, match="cannot use GroupNorm"):
        nnx.eval_shape(lambda: ours.audio_decoder_from_config(decoder_config(norm_type="group"), rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match=r"causality_axis is 'depth'"):
        ours.audio_decoder_from_config(decoder_config(causality_axis="depth"), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"vocoder\.resblock is '2'"):
        ours.vocoder_from_config({"vocoder": {**HIFI_GAN, "resblock": "2"}}, rngs=nnx.Rngs(0))
    with pytest.raises(RuntimeError, match="stand-in"):
        AudioProcessor(target_sample_rate=16000, mel_bins=64, mel_hop_length=160, n_fft=1024)
