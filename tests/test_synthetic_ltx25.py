"""scripts/make_synthetic_checkpoint.py --model 2.5: LTX-2.5's per-component files against files ltx-core 1.2.0
wrote itself (tests/fixtures/ltx25/, tests/fixtures/ltx25_diffusion_decoder/), upstream's quick start run on its --tiny
files by `ltx-jax generate` on 8 simulated CPU devices, and a flow decoding with the diffusion VAE file."""

import gc
import json
import pathlib
import sys
import weakref

import av
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_events import CompileThreads
from PIL import Image
from safetensors import safe_open

from ltx_jax import LTXPipeline
from ltx_jax.cli import generate
from ltx_jax.model.video_vae import (
    DimensionSizeConfig,
    TileSizeConfig,
    diffusion_tiled_decode,
    load_diffusion_video_decoder,
)
from ltx_jax.parallel import make_mesh
from ltx_jax.pipeline import Guidance, ImageCondition
from ltx_jax.pipeline.decoders import DiffusionVideoDecoding, frames_uint8
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.prompts import TextEncoder
from ltx_jax.pipeline.stages import PromptEmbeddings

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "scripts"))
import make_synthetic_checkpoint  # noqa: E402
import synthetic_gemma  # noqa: E402
import synthetic_ltx25  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "ltx25"
DIFFUSION_DECODER = pathlib.Path(__file__).parent / "fixtures" / "ltx25_diffusion_decoder" / "decoder.safetensors"


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


def test_diffusion_decoder_plan_is_the_file_ltx_core_1_2_loads():
    """For the config of the decoder file 1.2.0 loaded (its `coarse_head` aside, whose name is a guess): the same
    `decoder.*` keys and shapes; at the class defaults, about 105M parameters (ltx25-reference.md §4)."""
    shapes, metadata = header(DIFFUSION_DECODER)
    planned = synthetic_ltx25.plan_diffusion_decoder(json.loads(metadata["config"])["vae"])
    decoder = {k: v for k, v in shapes.items() if k.startswith("decoder.") and "coarse_" not in k}
    assert {k: v.shape for k, v in planned.items()} == decoder  # the statistics come with the encoder
    full = synthetic_ltx25.diffusion_vae_config(synthetic_ltx25.ltx25_config()["vae"], tiny=False)
    assert 104e6 < sum(t.nbytes for t in synthetic_ltx25.plan_diffusion_decoder(full).values()) / 2 < 106e6


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


def test_a_flow_decodes_with_the_diffusion_vae_file(tiny, tmp_path):
    """`ltx-2.5-video-vae-bf16` (a CausalDiffusionVAE) as the video VAE file: the one-stage flow on 8 simulated
    devices, conditioned on an image (encoded by the same file's `vae.encoder`), decodes with the diffusion
    decoder in the tiles given (two in W, on two of the devices; compiled ahead while stage 1 runs) and writes the
    mp4; its frames are the run's latent decoded alone on one device in the same tiles from the run's seed."""
    _, metadata = header(pathlib.Path(tiny["diffusion_video_vae_path"]))
    assert json.loads(metadata["config"])["vae"]["_class_name"] == "CausalDiffusionVAE"
    assert metadata["model_version"] == "2.5.0"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (128, 128, 3), np.uint8)).save(tmp_path / "image.png")
    tiling = TileSizeConfig(width=DimensionSizeConfig(96, 32))
    files = CheckpointFiles(
        transformer_path=tiny["transformer_path"], video_vae_path=tiny["diffusion_video_vae_path"],
        audio_vae_path=tiny["audio_vae_path"], video_decode_tiling=tiling,
    )  # fmt: skip
    pipeline = LTXPipeline.from_files(files, flow="one-stage", mesh=make_mesh(8))
    assert isinstance(pipeline._decode_video, DiffusionVideoDecoding)
    prompt = PromptEmbeddings(jnp.ones((1, 8, 64)), jnp.ones((1, 8, 32)))
    with CompileThreads() as threads:
        out = pipeline(
            prompt, height=128, width=128, num_frames=9, num_inference_steps=2, seed=3, guidance=Guidance(),
            images=[ImageCondition(tmp_path / "image.png", 0, 1.0)], output_path=tmp_path / "diffusion.mp4",
        )  # fmt: skip
    decoder_programs = {"jit(_diffusion_features)", "jit(_decode_diffusion_tile)"}  # compiled while stage 1 ran
    assert decoder_programs <= threads.ahead()
    assert not decoder_programs & threads.on_main_thread()
    assert out.video.shape == (9, 128, 128, 3)
    decoder = load_diffusion_video_decoder(tiny["diffusion_video_vae_path"], param_dtype=jnp.bfloat16)
    alone = diffusion_tiled_decode.tiled_decode(
        decoder, out.video_latent, tiling, key=jax.random.key(3), devices=jax.devices()[:1]
    )
    np.testing.assert_array_equal(out.video, np.asarray(frames_uint8(jnp.concatenate(list(alone), axis=2))))
    with av.open(str(tmp_path / "diffusion.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 9


def test_a_decode_tiling_the_diffusion_decoder_cannot_use_is_refused_before_loading(tiny, no_model_building):
    """Overlaps under the diffusion decoder's halos (the tiny one's: 32 px) are refused from the files' headers."""
    files = CheckpointFiles(
        transformer_path=tiny["transformer_path"], video_vae_path=tiny["diffusion_video_vae_path"],
        audio_vae_path=tiny["audio_vae_path"], video_decode_tiling=TileSizeConfig(height=DimensionSizeConfig(64, 16)),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"video_decode_tiling\.height\.overlap=16 is below the 32 px"):
        LTXPipeline.from_files(files, flow="one-stage", mesh=make_mesh(1))
    split = ["--transformer-path", tiny["transformer_path"], "--video-vae-path", tiny["diffusion_video_vae_path"],
             "--audio-vae-path", tiny["audio_vae_path"], "--text-encoder-path", tiny["text_encoder_path"]]  # fmt: skip
    args = generate.parse_args([*split, "--video-decode-tiling", "0/0,64/16,0/0"])
    assert args.video_decode_tiling == TileSizeConfig(height=DimensionSizeConfig(64, 16))
    with pytest.raises(ValueError, match=r"overlap=16 is below the 32 px.*\(--video-decode-tiling on the command line"):
        generate.run(args)
    conv = ["--video-vae-path", tiny["video_vae_path"], "--video-decode-tiling", "12/4,512/128,512/128"]
    with pytest.raises(ValueError, match=r"video_decode_tiling\.frames tiling .* of 8 .*--video-decode-tiling"):
        generate.run(generate.parse_args([*split, *conv]))  # the conv decoder's grid, before loading too
    for bad in ("64,64", "16/32,64/32,64/32", "nan/0,0/0,0/0"):
        with pytest.raises(SystemExit):
            generate.parse_args([*split, "--video-decode-tiling", bad])
