"""scripts/make_synthetic_checkpoint.py --model 2.5: LTX-2.5's per-component files against files ltx-core 1.2.0
wrote itself (tests/fixtures/ltx25/), and upstream's quick start run on its --tiny files by `ltx-jax generate` on 8
simulated CPU devices."""

import gc
import json
import pathlib
import sys
import weakref

import av
import pytest
from compile_events import CompileThreads
from safetensors import safe_open

from ltx_jax import LTXPipeline
from ltx_jax.cli import generate
from ltx_jax.pipeline.prompts import TextEncoder

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "scripts"))
import make_synthetic_checkpoint  # noqa: E402
import synthetic_gemma  # noqa: E402
import synthetic_ltx25  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "ltx25"


def header(path: pathlib.Path) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    with safe_open(str(path), framework="np") as f:
        return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}, f.metadata()


def test_transformer_plan_is_the_file_ltx_core_1_2_writes():
    """For the config of 1.2.0's own 2-block LTX-2.5 transformer file: the same keys and shapes (no FF biases, no
    prompt AdaLN, the keyframe embedding), and the text projection that 1.2.0 packs into its text-encoder file."""
    shapes, metadata = header(FIXTURES / "ltx25_transformer.safetensors")
    projection, _ = header(FIXTURES / "gemma4_text_encoder.safetensors")
    gemma = {"text_config": {"hidden_size": 32, "num_hidden_layers": 6}}  # the fixture's Gemma 4
    planned = synthetic_ltx25.plan_transformer(json.loads(metadata["config"]), gemma)
    assert {k: v.shape for k, v in planned["transformer"].items()} == shapes
    assert {k: v.shape for k, v in planned["projection"].items()} == {
        k: v for k, v in projection.items() if k.startswith("text_embedding_projection.")
    }


def test_duration_head_plan_is_the_file_ltx_core_1_2_writes():
    shapes, metadata = header(FIXTURES / "duration_head.safetensors")
    config = json.loads(metadata["config"])
    widths = config["transformer"]
    planned = synthetic_ltx25.plan_duration_head(
        widths["cross_attention_dim"], widths["audio_cross_attention_dim"], config["duration_head"]
    )
    assert {k: v.shape for k, v in planned.items()} == shapes


def test_full_size_transformer_is_the_22b_without_what_2_5_dropped():
    """At real width: 48 blocks, no bias on any feed-forward, the keyframe embedding as wide as the video stream."""
    config = synthetic_ltx25.ltx25_config()
    gemma = {"text_config": {"hidden_size": 3840, "num_hidden_layers": 48}}
    planned = synthetic_ltx25.plan_transformer(config, gemma)
    dit = planned["transformer"]
    assert dit["model.diffusion_model.keyframes_abs_pos_embedding"].shape == (1, 4096)
    assert not [k for k in dit if k.endswith(("ff.net.2.bias", "ff.net.0.proj.bias")) or "prompt_adaln" in k]
    assert "model.diffusion_model.transformer_blocks.47.attn1.to_q.weight" in dit
    assert planned["projection"]["text_embedding_projection.video_aggregate_embed.weight"].shape == (4096, 3840 * 49)
    billions = sum(t.nbytes for t in dit.values()) / 2 / 1e9
    assert 20 < billions < 23  # "22b"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("ltx25")
    return make_synthetic_checkpoint.make_synthetic_checkpoint(
        out, layers=2, gemma_layers=2, tiny=True, workers=2, model="2.5"
    )


def test_files_have_upstreams_names_and_metadata(tiny):
    assert {k: pathlib.Path(v).name for k, v in tiny.items()} == synthetic_ltx25.FILES
    assert pathlib.Path(tiny["distilled_transformer_path"]).resolve() == pathlib.Path(tiny["transformer_path"])
    _, transformer = header(pathlib.Path(tiny["transformer_path"]))
    assert transformer["model_version"] == "2.5.0"
    assert json.loads(transformer["gemma_source_checkpoint"]) == {"gemma_version": "gemma4-12b-ltx-v1"}
    _, text_encoder = header(pathlib.Path(tiny["text_encoder_path"]))
    assert json.loads(text_encoder["gemma_config"])["gemma_version"] == "gemma4-12b-ltx-v1"
    assert not list(pathlib.Path(tiny["transformer_path"]).parent.glob("*.partial"))


def test_upstreams_quick_start_runs_on_the_tiny_files(tiny, tmp_path, monkeypatch):
    """ltx-pipelines 1.2.0's README command (`ltx_pipelines.distilled` on the split files), flag for flag, with
    two more of its flags (the duration head choosing the length; the prompt enhanced by a Gemma 3 of its own,
    which Gemma 4 cannot be), end to end in bf16: LTX-2.5's defaults, Gemma 4 encodes the enhanced prompt and is
    freed before the DiT is loaded, stage 1 at half size, the upsampler, stage 2, decoding, the mp4."""
    enhancer = tmp_path / "gemma-3"
    synthetic_gemma.write_gemma(enhancer, synthetic_gemma.gemma_config(1, tiny=True), 0, 2, 8 * 10**6)
    encoders, text_encoder_alive_at_load = [], []
    load_text, load_pipeline = TextEncoder.from_files.__func__, LTXPipeline.from_files.__func__

    def text_encoder(cls, *args, **kwargs):
        text = load_text(cls, *args, **kwargs)
        encoders.append(weakref.ref(text.encoder))
        return text

    def pipeline(cls, files, **kwargs):
        gc.collect()
        text_encoder_alive_at_load.append([encoder() is not None for encoder in encoders] + [files.text_encoder()])
        return load_pipeline(cls, files, **kwargs)

    monkeypatch.setattr(TextEncoder, "from_files", classmethod(text_encoder))
    monkeypatch.setattr(LTXPipeline, "from_files", classmethod(pipeline))
    out = tmp_path / "quick_start.mp4"
    with CompileThreads() as threads:
        info = generate.run(generate.parse_args([
            "--mesh", "8", "--pipeline", "distilled",
            "--transformer-path", tiny["distilled_transformer_path"], "--text-encoder-path", tiny["text_encoder_path"],
            "--video-vae-path", tiny["video_vae_path"], "--audio-vae-path", tiny["audio_vae_path"],
            "--spatial-upsampler-path", tiny["spatial_upsampler_path"],
            "--duration-head-path", tiny["duration_head_path"], "--auto-duration", "0.3", "0.4",
            "--enhance-prompt", "--prompt-enhancer-gemma-root", str(enhancer),
            "--height", "128", "--width", "128", "--prompt", "A cow in the rain", "--output-path", str(out),
        ]))  # fmt: skip
    # the upsampler, stage 2's DiT programs, the video's tiles and the audio decoder compiled while stage 1
    # denoised, not again after: the main thread compiled the DiT's programs once, for stage 1
    after_stage_1 = {"jit(upsample)", "jit(_decode_tile)", "jit(decode_audio)"}
    dit_programs = ["jit(prepare_local)", "jit(finish_local)"]
    assert after_stage_1 | set(dit_programs) <= threads.ahead()
    assert not after_stage_1 & threads.on_main_thread()
    main_dit = [name for thread, name in threads.compiled if name in dit_programs and thread == "MainThread"]
    assert main_dit == dit_programs
    assert "LTX-2.5" in info["weights"]
    (enhanced,) = info["enhanced"]
    assert enhanced.strip()
    assert enhanced != "A cow in the rain"
    assert text_encoder_alive_at_load == [[False, None]]  # one Gemma 4, freed; the pipeline loads without it
    (video,) = info["videos"]
    settings = video["output"].settings
    assert settings.num_frames == 9  # 0.3-0.4 s at 24 fps, snapped to 8k + 1
    assert set(video["output"].forwards) == {8, 32}  # stage 1 at 2 x 2 latents x 2 frames, stage 2 at 4 x 4 x 2
    stages = [video["output"].timings[phase] for phase in ("stage_1_denoising", "upsampling", "stage_2_denoising")]
    assert 0 < sum(stages) <= video["output"].timings["denoising"]
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 9
        assert container.streams.audio[0].sample_rate == 48000  # the BigVGAN + BWE vocoder


def test_enhancement_on_gemma_4_needs_a_gemma_3_of_its_own(tiny, tmp_path, no_model_building):
    """Without `--prompt-enhancer-gemma-root` the command says what to add before anything is loaded (the quick
    start above enhances with one), and the flag alone is refused too."""
    split = {k: tiny[k] for k in ("transformer_path", "video_vae_path", "audio_vae_path", "text_encoder_path")}
    argv = [x for key, path in split.items() for x in (f"--{key.removesuffix('_path').replace('_', '-')}-path", path)]
    argv += ["--output-path", str(tmp_path / "x.mp4")]
    with pytest.raises(ValueError, match="add --prompt-enhancer-gemma-root GEMMA_DIR"):
        generate.run(generate.parse_args(["--enhance-prompt", *argv]))
    with pytest.raises(ValueError, match="--prompt-enhancer-gemma-root rewrites prompts for --enhance-prompt"):
        generate.run(generate.parse_args(["--prompt-enhancer-gemma-root", str(tmp_path), *argv]))
    missing = ["--enhance-prompt", "--prompt-enhancer-gemma-root", str(tmp_path / "missing")]
    with pytest.raises(FileNotFoundError, match=r"--prompt-enhancer-gemma-root\) '.*missing' is not a directory"):
        generate.run(generate.parse_args([*missing, *argv]))
