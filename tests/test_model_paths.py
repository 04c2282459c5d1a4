"""Model files in either layout (one checkpoint, or LTX-2.5's per-component files): every wrong combination is
refused by name before anything loads, and an LTX-2.5 transformer is refused until its flows are ported. The
split files generating what one checkpoint does is tests/test_generate.py's."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

import ltx_jax
from ltx_jax.pipeline import CheckpointFiles
from ltx_jax.pipeline.model_ledger import dit_model_version
from ltx_jax.pipeline.model_paths import split_tensors

ONE = {"x": np.zeros(1, np.float32)}


def write(path, tensors=ONE, config=None, **metadata):
    save_file(tensors, str(path), metadata={**({"config": json.dumps(config)} if config else {}), **metadata})
    return path


@pytest.fixture
def split(tmp_path):
    """Three files with the sections each needs (no DiT: the checks before loading read the headers only)."""
    return {
        "transformer_path": write(
            tmp_path / "t.safetensors", {"model.diffusion_model.a": ONE["x"]}, {"transformer": {}}
        ),
        "video_vae_path": write(tmp_path / "v.safetensors", {"decoder.a": ONE["x"]}, {"vae": {}}),
        "audio_vae_path": write(
            tmp_path / "a.safetensors", {"audio_vae.a": ONE["x"]}, {"audio_vae": {}, "vocoder": {}}
        ),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"audio_vae_path": None}, "missing --audio-vae-path"),
        ({"checkpoint_path": "ltx.safetensors"}, "not both"),
        ({"transformer_path": None, "checkpoint_path": "ltx.safetensors"}, "go with --transformer-path"),
        ({"components_path": "x.safetensors"}, "components_path .* goes with a converted checkpoint_path"),
    ],
    ids=["a-split-file-missing", "both-layouts", "vae-files-without-transformer", "components-path"],
)
def test_wrong_combinations_are_refused_naming_the_flags(split, change, message):
    with pytest.raises(ValueError, match=message):
        CheckpointFiles(**{**split, **change}).check("one-stage")


def test_a_file_passed_for_another_component_is_named(split):
    swapped = {**split, "video_vae_path": split["audio_vae_path"]}
    with pytest.raises(ValueError, match=r"--video-vae-path .*a.safetensors.* has no vae section"):
        CheckpointFiles(**swapped).check("one-stage")


def test_nothing_given_asks_for_either_layout():
    with pytest.raises(ValueError, match="give checkpoint_path .* or transformer_path"):
        CheckpointFiles().check("one-stage")


def test_a_tensor_in_two_files_is_refused_naming_both(split, tmp_path):
    clash = write(tmp_path / "v2.safetensors", {"model.diffusion_model.a": ONE["x"]}, {"vae": {}})
    with pytest.raises(ValueError, match=r"v2.safetensors and .*t.safetensors both hold the tensor"):
        split_tensors({**split, "video_vae_path": clash})


def test_two_text_encoders_are_refused(tmp_path):
    checkpoint = write(tmp_path / "ltx.safetensors", config={"transformer": {}})
    text_encoder = write(tmp_path / "te.safetensors")
    files = CheckpointFiles(checkpoint, gemma_root=tmp_path, text_encoder_path=text_encoder)
    with pytest.raises(ValueError, match="keep one"):
        files._check_text_encoder()


@pytest.mark.parametrize(
    ("transformer_version", "vae_version", "version", "crf"),
    [("2.5.0", "2.5.0", "2.5", 18), ("2.4-rc2", None, "2.5", 33), ("2.3.0", "2.4.0", "2.3", 18), ("2", None, "2", 33)],
)
def test_defaults_follow_the_transformers_version_and_the_crf_the_video_vaes(
    split, tmp_path, transformer_version, vae_version, version, crf
):
    """As 1.2.0's `detect_params`: 2.4 and later take 2.3's steps and guidance with CRF 18, read from the video
    VAE's own file for the images (`ImageConditioner`), an unversioned file the oldest defaults."""
    transformer = write(
        tmp_path / "t.safetensors", {"model.diffusion_model.patchify_proj.weight": ONE["x"]},
        ltx_jax.LTXConfig.tiny().to_metadata(), model_version=transformer_version,
    )  # fmt: skip
    versioned = {"model_version": vae_version} if vae_version else {}
    vae = write(tmp_path / "v.safetensors", {"decoder.a": ONE["x"]}, {"vae": {}}, **versioned)
    files = CheckpointFiles(**{**split, "transformer_path": transformer, "video_vae_path": vae})
    assert files.model_version() == version
    assert dit_model_version(transformer) == tuple(int(p) for p in transformer_version.replace("-rc2", "").split("."))
    defaults = files.defaults("two-stage")
    assert defaults.image_crf == crf
    assert defaults.num_inference_steps == (40 if version == "2" else 30)


def test_a_missing_file_is_named_by_its_flag(split, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"--video-vae-path '.*missing.safetensors' must be an existing"):
        CheckpointFiles(**{**split, "video_vae_path": tmp_path / "missing.safetensors"}).check("one-stage")
    files = CheckpointFiles(**split, text_encoder_path=tmp_path / "te.safetensors")
    with pytest.raises(FileNotFoundError, match=r"text_encoder_path=.*te.safetensors' must be an existing"):
        files.check("one-stage")
