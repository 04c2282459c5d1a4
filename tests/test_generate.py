"""scripts/generate.py end to end on the embedded default (8 simulated CPU devices): a playable mp4
with audio, every flow, image conditioning, checkpoint files, and the same latents on one device and
on the mesh."""

import dataclasses
import json
import logging
import pathlib
import re
import subprocess
import sys

import av
import jax
import numpy as np
import pytest
import safetensors.numpy
from flax import nnx
from PIL import Image
from tolerances import SP

import ltx_jax
from ltx_jax.convert.dit_tensors import Lora
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.lora import fused_kernel
from ltx_jax.model.upsampler import LatentUpsamplerConfigurator
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.pipeline import (
    DEFAULT_NEGATIVE_PROMPT,
    CheckpointFiles,
    ImageCondition,
    LTXPipeline,
    MultiModalGuiderParams,
    components,
    embedded,
    model_ledger,
    pipelines,
    requests,
    write_mp4,
)

ROOT = pathlib.Path(__file__).parents[1]
from ltx_jax.cli import generate  # noqa: E402 - the command: its parser, without running it


def probe(path):
    with av.open(str(path)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        frames = sum(1 for _ in container.decode(video=0))
        return frames, (video.width, video.height), float(video.average_rate), audio.sample_rate, audio.channels


def test_readme_command_writes_a_playable_mp4_with_audio(tmp_path):
    """`python scripts/generate.py --mesh 8`, as the README runs it (in a fresh process, so that the script
    sets up the simulated devices itself)."""
    out = tmp_path / "out.mp4"
    result = subprocess.run(
        [sys.executable, "scripts/generate.py", "--mesh", "8", "--output-path", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RANDOM weights" in result.stdout
    assert "96 video tokens" in result.stdout
    assert probe(out) == (25, (192, 128), 24.0, 24000, 2)


@pytest.mark.parametrize("flow", ["two-stage", "two-stage-hq", "distilled"])
def test_two_stage_flows_run_on_the_mesh(tmp_path, flow):
    out = tmp_path / f"{flow}.mp4"
    steps = ["--num-inference-steps", "2"] if flow != "distilled" else []  # distilled: fixed 8 + 3 sigmas
    args = generate.parse_args(
        ["--mesh", "8", "--pipeline", flow, "--height", "128", "--width", "128", "--num-frames", "9", *steps,
         "--output-path", str(out)]
    )  # fmt: skip
    info = generate.run(args)
    assert probe(out)[:3] == (9, (128, 128), 24.0)
    # stage 1 at half resolution (2 x 2 latents x 2 frames), stage 2 at full (4 x 4 x 2)
    assert set(info["videos"][0]["output"].forwards) == {8, 32}


def test_keyframe_interpolation_appends_every_image_as_keyframe_tokens(tmp_path):
    """Two images (frames 0 and 8) on 8 devices: both are appended as keyframe tokens in both stages
    (4 and 16 tokens each at 64x64 and 128x128), frame 0 included, where two-stage replaces frame 0."""
    image_flags = []
    for frame in ("0", "8"):
        path = tmp_path / f"frame{frame}.png"
        Image.fromarray((np.random.default_rng(int(frame)).random((64, 64, 3)) * 255).astype(np.uint8)).save(path)
        image_flags += ["--image", str(path), frame, "1.0"]
    out = tmp_path / "keyframes.mp4"
    args = generate.parse_args(
        ["--mesh", "8", "--pipeline", "keyframe-interpolation", "--height", "128", "--width", "128", "--num-frames",
         "9", "--num-inference-steps", "2", *image_flags, "--output-path", str(out)]
    )  # fmt: skip
    info = generate.run(args)
    assert probe(out)[:3] == (9, (128, 128), 24.0)
    assert set(info["videos"][0]["output"].forwards) == {8 + 2 * 4, 32 + 2 * 16}


@pytest.mark.parametrize("skip_stage_2", [False, True])
def test_ic_lora_appends_the_reference_video_in_stage_1(tmp_path, skip_stage_2):
    """--pipeline ic-lora on 8 devices: the reference video's tokens (2 x 2 x 2 at 64x64) join stage 1's
    8 only; stage 2 (32 tokens) runs without them, or is skipped and the half-size video written (that
    run with an attention mask video too)."""
    reference = tmp_path / "depth.mp4"
    write_mp4(reference, (np.random.default_rng(0).random((9, 64, 64, 3)) * 255).astype(np.uint8), 24.0)
    out = tmp_path / "ic_lora.mp4"
    extra = ["--skip-stage-2", "--conditioning-attention-mask", str(reference), "0.5"] if skip_stage_2 else []
    args = generate.parse_args(
        ["--mesh", "8", "--pipeline", "ic-lora", "--height", "128", "--width", "128", "--num-frames", "9",
         "--video-conditioning", str(reference), "1.0", *extra, "--output-path", str(out)]
    )  # fmt: skip
    info = generate.run(args)
    size = 64 if skip_stage_2 else 128
    assert probe(out)[:3] == (9, (size, size), 24.0)
    assert set(info["videos"][0]["output"].forwards) == ({16} if skip_stage_2 else {16, 32})


SMALL = {"height": 128, "width": 192, "num_frames": 9, "num_inference_steps": 3, "seed": 1}


def test_single_device_and_mesh_give_the_same_latents():
    """The pipeline on 8 devices against the flow run with the plain model on one device (jitted)."""
    out = LTXPipeline.embedded(mesh=make_mesh(8))("a fox", **SMALL)
    models = embedded.embedded_models("one-stage")
    prompt, negative = components.encode_texts(models.prompt_encoder, ["a fox", DEFAULT_NEGATIVE_PROMPT])
    request = requests.Request(
        prompt=prompt, negative=negative, guidance=models.defaults.guidance, frame_rate=24.0,
        **{k: v for k, v in SMALL.items()},
    )  # fmt: skip
    one_device = SequenceParallel(models.components.transformer, make_mesh(1))
    single = pipelines.generate(dataclasses.replace(models.components, transformer=one_device), request, "one-stage")
    for ours, reference in zip((out.video_latent, out.audio_latent), single, strict=True):
        error = float(np.abs(np.asarray(ours) - np.asarray(reference)).max() / np.abs(np.asarray(reference)).max())
        assert error <= SP


def test_image_at_frame_zero_is_kept_at_strength_one(tmp_path):
    path = tmp_path / "image.png"
    Image.fromarray((np.random.default_rng(0).random((100, 150, 3)) * 255).astype(np.uint8)).save(path)
    out = LTXPipeline.embedded(mesh=make_mesh(8))("a fox", images=[ImageCondition(path, 0, 1.0)], **SMALL)
    encoded = embedded.embedded_models("one-stage").components.encode_image(path, 128, 192)
    assert encoded.shape == (1, 16, 1, 4, 6)
    np.testing.assert_array_equal(np.asarray(out.video_latent)[:, :, :1], np.asarray(encoded))
    assert float(np.abs(np.asarray(out.video_latent)[:, :, 1:]).max()) > 0.1  # the other frames were generated


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mesh", "16"], "mesh"),
        (["--mesh", "3"], "divisible by the mesh size"),
        (["--num-frames", "24"], r"8k\+1"),
        (["--height", "100"], "multiple of 32"),
        (["--height", "0"], "height=0 must be a positive multiple of 32"),
        (["--num-inference-steps", "1"], "at least 2"),
        (["--pipeline", "two-stage", "--height", "96"], "multiple of 64"),
        (["--image", "missing.png", "0", "1.0"], "does not exist"),
        (["--image", "missing.png", "0", "x"], "STRENGTH a finite number"),
        (["--image", "missing.png", "0", "nan"], "STRENGTH a finite number"),
        (["--image", "missing.png", "0"], "3 or 4 values"),
        (["--pipeline", "ic-lora", "--height", "128", "--width", "128"], "needs at least one reference video"),
        (["--skip-stage-2"], "skip_stage_2 \\(--skip-stage-2\\) belongs to the ic-lora flow"),
        (["--video-conditioning", "missing.mp4", "x"], "STRENGTH must be a finite number"),
        (["--video-conditioning", "missing.mp4", "inf"], "STRENGTH must be a finite number"),
        (
            ["--conditioning-attention-mask", "mask.mp4", "0.5"],
            "mask \\(--conditioning-attention-mask\\) belong to the ic-lora",
        ),
        (["--distilled-lora-strength-stage-2", "0.4"], "apply to runs on model files"),
        (["--image", str(ROOT / "README.md"), "0", "1.0"], "README.md' cannot be read as an image"),
        (["--image", "missing.png", "0", "1.0", "high"], "CRF an integer"),
        (["--gemma-root", "gemma"], "apply to runs on model files"),
        (["--dtype", "float32"], "apply to runs on model files"),
        (["--pipeline", "distilled", "--num-inference-steps", "4"], "distilled flow runs fixed sigmas"),
        (["--pipeline", "distilled", "--video-cfg-guidance-scale", "2"], "distilled flow runs fixed sigmas"),
        (["--checkpoint-path", "missing.safetensors"], "must be an existing .safetensors file"),
        (["--strategy", "usp"], "needs --ulysses-degree"),
        (["--prompt", "a fox", "--prompt", " "], "--prompt must be non-empty text"),
        (["--backend", "ffi"], "backend='ffi' is a CUDA kernel"),
    ],
)
def test_bad_arguments_fail_before_anything_is_built(tmp_path, no_model_building, argv, message):
    args = generate.parse_args([*argv, "--output-path", str(tmp_path / "x.mp4")])
    with pytest.raises((ValueError, TypeError, FileNotFoundError), match=message):
        generate.run(args)
    assert not (tmp_path / "x.mp4").exists()
    assert jax.device_count() == 8


def test_an_output_path_that_is_a_directory_is_refused_before_anything_runs(tmp_path):
    for flag in ("--output-path", "--save-latents"):
        with pytest.raises(IsADirectoryError, match=f"{flag} {tmp_path} is a directory"):
            generate.run(generate.parse_args([flag, str(tmp_path), "--height", "0"]))  # checked before the sizes


def test_prompt_embeddings_file_problems_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="--prompt-embeddings .* does not exist"):
        generate.load_prompt_embeddings(tmp_path / "missing.npz")
    np.savez(tmp_path / "odd.npz", text=np.zeros(3))
    with pytest.raises(ValueError, match="expected 'video' and/or 'audio'"):
        generate.load_prompt_embeddings(tmp_path / "odd.npz")


def exported(module, prefix, statistics_prefix=None):
    """A module's parameters under their checkpoint keys, in torch layout (as an official file stores them)."""
    flat = dict(nnx.to_flat_state(nnx.state(module, nnx.Param)))
    tensors = {}
    for key, (path, transposed, _, _) in expected_keys(module).items():
        value = np.asarray(flat[path].get_value())
        stats = statistics_prefix is not None and key.startswith("per_channel_statistics.")
        tensors[(statistics_prefix if stats else prefix) + key] = np.ascontiguousarray(value.T if transposed else value)
    return tensors


def write_tiny_checkpoint(tmp_path, seed=10):
    """The embedded default's weights as an official single-file checkpoint (DiT, video VAE, audio VAE,
    vocoder under their prefixes) and its prompt embeddings as an .npz; returns both paths."""
    config = json.loads(json.dumps(embedded.EMBEDDED_CONFIG))
    model = ltx_jax.LTXModel(ltx_jax.LTXConfig.from_metadata(config), rngs=nnx.Rngs(seed))
    video_decoder, audio_decoder, vocoder = components.decoder_modules(config, None, seed, np.float32)
    tensors = {
        **exported(model, "model.diffusion_model."),
        **exported(video_decoder, "vae.decoder.", "vae."),
        **exported(audio_decoder, "audio_vae.decoder.", "audio_vae."),
        **exported(vocoder, "vocoder."),
    }
    checkpoint = tmp_path / "tiny.safetensors"
    safetensors.numpy.save_file(tensors, checkpoint, metadata={"config": json.dumps(config)})
    encoder = embedded.embedded_prompt_encoder(config, seed)
    prompt, negative = components.encode_texts(encoder, [generate.DEFAULT_PROMPT, DEFAULT_NEGATIVE_PROMPT])
    embeddings = tmp_path / "prompt.npz"
    np.savez(embeddings, video=prompt.video, audio=prompt.audio, negative_video=negative.video,
             negative_audio=negative.audio)  # fmt: skip
    return checkpoint, embeddings


def write_split_files(checkpoint, directory):
    """The checkpoint's components as LTX-2.5 ships them: transformer, video VAE (keys without `vae.`), audio VAE
    with the vocoder; each file's `config` holds its sections. Returns the three flags and paths."""
    tensors = safetensors.numpy.load_file(checkpoint)
    config = json.loads(SafetensorsFile(checkpoint).metadata["config"])
    parts = {
        "transformer": (("model.diffusion_model.",), ("transformer",)),
        "video-vae": (("vae.",), ("vae",)),
        "audio-vae": (("audio_vae.", "vocoder."), ("audio_vae", "vocoder")),
    }
    flags = []
    for name, (prefixes, sections) in parts.items():
        path = directory / f"{name}.safetensors"
        part = {k.removeprefix("vae."): v for k, v in tensors.items() if k.startswith(prefixes)}
        metadata = {"config": json.dumps({section: config[section] for section in sections})}
        safetensors.numpy.save_file(part, path, metadata=metadata)
        flags += [f"--{name}-path", str(path)]
    return flags


def test_checkpoint_file_equals_the_same_weights_built_in_memory(tmp_path, caplog):
    """--checkpoint-path + --prompt-embeddings generate the same latents as the in-memory embedded run,
    with the DiT replicated, with it split over the mesh (--shard-weights), from a converted directory
    (its DiT in Orbax, the rest from the file it was converted from, found beside it), and from the same
    weights as split files (--transformer-path, --video-vae-path, --audio-vae-path)."""
    checkpoint, embeddings = write_tiny_checkpoint(tmp_path)
    split = write_split_files(checkpoint, tmp_path)
    ltx_jax.convert_checkpoint(checkpoint, tmp_path / "converted", dtype="float32", progress=False)
    common = ["--mesh", "8", "--num-inference-steps", "3", "--height", "64", "--width", "96", "--num-frames", "9"]
    runs = {}
    for name, extra in (
        ("embedded", []),
        ("checkpoint", ["--checkpoint-path", str(checkpoint), "--prompt-embeddings", str(embeddings), "--dtype",
                        "float32", "--video-stg-blocks", "1", "--audio-stg-blocks", "1"]),
        ("sharded", ["--checkpoint-path", str(checkpoint), "--prompt-embeddings", str(embeddings), "--dtype",
                     "float32", "--video-stg-blocks", "1", "--audio-stg-blocks", "1", "--shard-weights"]),
        ("converted", ["--checkpoint-path", str(tmp_path / "converted"), "--prompt-embeddings", str(embeddings),
                       "--dtype", "float32", "--video-stg-blocks", "1", "--audio-stg-blocks", "1"]),
        ("split", [*split, "--prompt-embeddings", str(embeddings), "--dtype", "float32", "--video-stg-blocks", "1",
                   "--audio-stg-blocks", "1"]),
    ):  # fmt: skip
        latents = tmp_path / f"{name}.npz"
        args = generate.parse_args([*common, *extra, "--output-path", str(tmp_path / f"{name}.mp4"), "--save-latents",
                                    str(latents)])  # fmt: skip
        with caplog.at_level(logging.INFO, logger="ltx_jax.parallel.sequence_parallel"):
            caplog.clear()
            generate.run(args)
        placement = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SequenceParallel")]
        assert placement, "SequenceParallel did not log its placement"
        assert ("sharded weights" in placement[0]) == (name == "sharded"), placement[0]
        runs[name] = dict(np.load(latents))
    for name in ("checkpoint", "sharded", "converted", "split"):
        for stream in ("video", "audio"):
            reference = runs["embedded"][stream]
            error = np.abs(runs[name][stream] - reference).max() / np.abs(reference).max()
            assert error <= SP, f"{name} {stream}: {error:.2e}"


def test_two_stage_from_files_with_upsampler_and_distilled_lora(tmp_path):
    """--pipeline two-stage from files: the DiT checkpoint, a spatial upsampler file (its config in the
    metadata) and a distilled LoRA that stage 2 adds to the one resident copy of the DiT's weights."""
    checkpoint, embeddings = write_tiny_checkpoint(tmp_path)
    upsampler = LatentUpsamplerConfigurator.from_config(embedded.EMBEDDED_UPSAMPLER, rngs=nnx.Rngs(3))
    upsampler_file = tmp_path / "upsampler.safetensors"
    config = {"_class_name": "LatentUpsampler", **embedded.EMBEDDED_UPSAMPLER}
    safetensors.numpy.save_file(exported(upsampler, ""), upsampler_file, metadata={"config": json.dumps(config)})
    rng, module = np.random.default_rng(0), "transformer_blocks.0.attn1.to_q"
    lora = {
        f"diffusion_model.{module}.lora_A.weight": rng.standard_normal((4, 64)).astype(np.float32),
        f"diffusion_model.{module}.lora_B.weight": rng.standard_normal((64, 4)).astype(np.float32),
    }
    safetensors.numpy.save_file(lora, tmp_path / "lora.safetensors")
    out = tmp_path / "two_stage.mp4"
    argv = ["--mesh", "8", "--pipeline", "two-stage", "--height", "128", "--width", "128", "--num-frames", "9",
            "--num-inference-steps", "2", "--checkpoint-path", str(checkpoint), "--prompt-embeddings", str(embeddings),
            "--dtype", "float32", "--spatial-upsampler-path", str(upsampler_file), "--distilled-lora",
            str(tmp_path / "lora.safetensors"), "0.5"]  # fmt: skip
    args = generate.parse_args([*argv, "--output-path", str(out)])
    files = CheckpointFiles(checkpoint, spatial_upsampler_path=upsampler_file, dtype="float32",
                            distilled_lora=Lora(str(tmp_path / "lora.safetensors"), 0.5))  # fmt: skip
    models = model_ledger.load_models(files, "two-stage", make_mesh(8))
    parts = models.components
    base = parts.transformer.transformer_blocks[0].attn1.to_q.kernel.get_value()
    lora_block = parts.stage_2_transformer.transformer_blocks[0]
    assert lora_block.block.attn1.to_q.kernel.get_value() is base  # shared, the LoRA added as stage 2 runs
    a, b = (lora_block.lora_a[0].get_value(), lora_block.lora_b[0].get_value())
    assert float(np.abs(fused_kernel(base, a, b, 0.5) - base).max()) > 0.1
    pipe = LTXPipeline(models, flow="two-stage", mesh=make_mesh(8))  # its SequenceParallel copies share them too
    stage_1, stage_2 = (jax.tree.leaves(timed.forward.forward._state) for timed in pipe._timed)
    resident = {id(x): x.nbytes for x in [*stage_1, *stage_2]}
    assert sum(resident.values()) == sum(x.nbytes for x in stage_1) + a.nbytes + b.nbytes
    info = generate.run(args)
    assert probe(out)[:3] == (9, (128, 128), 24.0)
    assert set(info["videos"][0]["output"].forwards) == {8, 32}
    # --quantization fp8-cast: the blocks' linears in fp8 in both stages, stage 2 fusing the LoRA onto them;
    # the same run within what fp8 rounding moves (it moves: the quantization is applied)
    fp8 = generate.run(generate.parse_args([*argv, "--quantization", "fp8-cast", "--output-path", str(out)]))
    latents = [run["videos"][0]["output"].video_latent for run in (info, fp8)]
    assert 1e-4 < float(np.linalg.norm(latents[1] - latents[0]) / np.linalg.norm(latents[0])) < 0.3
    # two-stage-hq: the LoRA in both stages at the per-stage strengths, one copy of its factors
    hq = model_ledger.load_models(
        dataclasses.replace(files, distilled_lora_strength_stage_1=0.2), "two-stage-hq", make_mesh(8)
    ).components
    blocks = [model.transformer_blocks[0] for model in (hq.transformer, hq.stage_2_transformer)]
    assert [block.strength for block in blocks] == [0.2, 0.5]
    assert blocks[0].lora_a[0].get_value() is blocks[1].lora_a[0].get_value()


def test_context_parallel_strategies_generate_the_same_latents(tmp_path):
    """--strategy ring and --strategy usp (2 x 4 mesh) give the Ulysses run's latents."""
    small = ["--mesh", "8", "--num-inference-steps", "2", "--height", "64", "--width", "96", "--num-frames", "9"]
    latents = {}
    for strategy in ("ulysses", "ring", "usp"):
        path = tmp_path / f"{strategy}.npz"
        argv = [*small, "--strategy", strategy, "--ulysses-degree", "4", "--save-latents", str(path)]
        generate.run(generate.parse_args([*argv, "--output-path", str(tmp_path / f"{strategy}.mp4")]))
        latents[strategy] = np.load(path)
    for strategy in ("ring", "usp"):
        for stream in ("video", "audio"):
            reference = latents["ulysses"][stream]
            error = np.abs(latents[strategy][stream] - reference).max() / np.abs(reference).max()
            assert error <= SP, f"{strategy} {stream}: {error:.2e}"


TINY_RUN = ["--num-frames", "9", "--height", "64", "--width", "64", "--num-inference-steps", "2"]


def test_several_prompts_load_and_compile_once(tmp_path):
    """--prompt twice and a --prompts-file line: three numbered mp4s from one pipeline; after the first
    video nothing compiles."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a grey wolf\n\n")
    argv = ["--mesh", "8", *TINY_RUN, "--prompt", "a red fox", "--prompt", "an owl", "--prompts-file", str(prompts)]
    info = generate.run(generate.parse_args([*argv, "--output-path", str(tmp_path / "fox.mp4")]))
    paths = [video["path"] for video in info["videos"]]
    assert paths == [tmp_path / f"fox-00{i}.mp4" for i in (1, 2, 3)]
    assert all(probe(path)[0] == 9 for path in paths)
    assert [video["compiling"].split()[0] for video in info["videos"]][1:] == ["0", "0"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    for extra, message in ((["--prompts-file", str(empty)], "holds no prompt"),
                           (["--prompts-file", str(tmp_path / "none.txt")], "does not exist")):  # fmt: skip
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            generate.run(generate.parse_args([*extra, "--output-path", str(tmp_path / "x.mp4")]))


@pytest.mark.parametrize("flag", ["--mesh", "--max-batch-size", "--ulysses-degree", "--num-processes"])
def test_counts_below_one_are_usage_errors_naming_the_flag(flag, capsys):
    for value in ("0", "-2", "x"):
        with pytest.raises(SystemExit) as exit_info:
            generate.parse_args([flag, value])
        assert exit_info.value.code == 2
        assert f"argument {flag}" in capsys.readouterr().err


NUMBER_FLAGS = [
    *(f"--{modality}-{suffix}" for modality in ("video", "audio") for suffix in (
        "cfg-guidance-scale", "stg-guidance-scale", "rescale-scale")),
    "--a2v-guidance-scale", "--v2a-guidance-scale", "--frame-rate", "--start-time", "--end-time",
    "--audio-start-time", "--audio-max-duration", "--distilled-lora-strength-stage-1",
    "--distilled-lora-strength-stage-2",
]  # fmt: skip


@pytest.mark.parametrize("flag", NUMBER_FLAGS)
def test_numbers_that_are_not_finite_are_usage_errors_naming_the_flag(flag, capsys):
    """NaN or inf would run to the end and write NaN frames and audio (exit 0)."""
    for value in ("nan", "inf", "x"):  # "-inf" reads as a flag: argparse names the missing value itself
        with pytest.raises(SystemExit) as exit_info:
            generate.parse_args([flag, value])
        assert exit_info.value.code == 2
        assert f"argument {flag}: {value!r} is not a" in capsys.readouterr().err


@pytest.mark.parametrize("field", ["cfg_scale", "stg_scale", "rescale_scale", "modality_scale"])
def test_the_library_refuses_guidance_that_is_not_finite(field):
    for value in (float("nan"), float("inf"), "2"):
        with pytest.raises(ValueError, match=f"MultiModalGuiderParams.{field} must be a finite number"):
            MultiModalGuiderParams(**{field: value})


def test_the_library_refuses_the_same_counts():
    """What the flags refuse above, the Python API refuses too, before building anything."""
    with pytest.raises(ValueError, match="n must be a positive integer"):
        make_mesh(0)
    with pytest.raises(ValueError, match="max_batch_size must be a positive integer"):
        LTXPipeline.embedded(mesh=make_mesh(8), max_batch_size=0)


def test_a_compile_cache_path_that_is_a_file_is_refused_before_anything_starts(tmp_path, capsys):
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        generate.main(["--compile-cache-dir", str(not_a_dir), "--output-path", str(tmp_path / "x.mp4")])
    assert exit_info.value.code == 2
    assert re.search("^error: --compile-cache-dir .* is a file", capsys.readouterr().err)


def compile_report(output: str) -> tuple[int, float, int]:
    """(programs, seconds, cache hits) of the summary's first 'compiling:' line."""
    match = re.search(r"compiling: (\d+) programs in ([\d.]+) s, (\d+) from the persistent cache", output)
    assert match, output[-2000:]
    return int(match[1]), float(match[2]), int(match[3])


def test_a_second_run_with_the_same_compilation_cache_compiles_less(tmp_path):
    """generate.py twice in fresh processes with one --compile-cache-dir: the second takes most programs
    from the cache and spends a fraction of the first's compile time (a ratio, not a wall-clock bound)."""
    command = [sys.executable, "scripts/generate.py", "--mesh", "1", *TINY_RUN, "--compile-cache-dir",
               str(tmp_path / "cache"), "--output-path", str(tmp_path / "out.mp4")]  # fmt: skip
    reports = []
    for _ in range(2):
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        reports.append(compile_report(result.stdout))
    (programs, first_s, first_hits), (_, second_s, second_hits) = reports
    assert first_hits == 0
    assert second_hits >= programs // 2
    assert second_s < 0.5 * first_s
