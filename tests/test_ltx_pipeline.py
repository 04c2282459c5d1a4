"""`ltx_jax.LTXPipeline` on the embedded default (8 simulated CPU devices): load once, generate many;
no recompilation for the same shapes; the same seed gives the same video; bad arguments raise before
anything is loaded or computed."""

import ast
import gc
import pathlib
import weakref

import av
import jax
import numpy as np
import pytest
from compile_events import CompileThreads
from flax import nnx

import ltx_jax
from ltx_jax.model.duration_head import duration_head_from_config
from ltx_jax.parallel import make_mesh
from ltx_jax.pipeline import GenerationSettings, Guidance, ImageCondition, MultiModalGuiderParams, PromptEmbeddings
from ltx_jax.pipeline.duration import DurationPredictor
from ltx_jax.pipeline.embedded import EMBEDDED_CONFIG

ROOT = pathlib.Path(__file__).parents[1]
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # jax's event for every XLA compilation
SMALL = {"height": 64, "width": 96, "num_frames": 9, "num_inference_steps": 2}


@pytest.fixture(scope="module")
def pipe():
    return ltx_jax.LTXPipeline.embedded(mesh=make_mesh(8))


def decoded(path: pathlib.Path) -> dict[str, np.ndarray]:
    with av.open(str(path)) as container:
        video = np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)])
    with av.open(str(path)) as container:
        audio = np.concatenate([frame.to_ndarray() for frame in container.decode(audio=0)], axis=-1)
    return {"video": video, "audio": audio}


class CompileCounter:
    def __init__(self):
        self.count = 0

    def __call__(self, event, duration, **kwargs):
        self.count += event == BACKEND_COMPILE

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)


def test_generates_many_without_compiling_again(pipe, tmp_path):
    with CompileThreads() as threads:
        first = pipe("a red fox", seed=3, **SMALL)
    # The decoders compiled on the background thread while the DiT denoised, and the decoding found them
    # compiled (frames_uint8 is shared by every pipeline: an earlier test may have compiled it).
    decoders = {"jit(decode_video)", "jit(decode_audio)", "jit(frames_uint8)"}
    assert not threads.on_main_thread() & decoders
    assert {"jit(decode_video)", "jit(decode_audio)"} <= threads.ahead() <= decoders
    streamed = tmp_path / "streamed.mp4"  # written while decoding
    with CompileCounter() as compiles:
        again = pipe("a red fox", seed=3, output_path=streamed, **SMALL)
        other_seed = pipe("a red fox", seed=4, **SMALL)
        other_prompt = pipe("a grey wolf", seed=3, **SMALL)
    assert compiles.count == 0
    np.testing.assert_array_equal(again.video, first.video)
    np.testing.assert_array_equal(again.audio, first.audio)
    assert not np.array_equal(other_seed.video, first.video)
    assert not np.array_equal(other_prompt.video, first.video)

    assert first.video.shape == (9, 64, 96, 3)
    assert first.video.dtype == np.uint8
    assert first.audio.ndim == 2
    assert first.audio.shape[1] == 2
    assert first.audio.dtype == np.float32
    assert (first.frame_rate, first.sample_rate) == (24.0, 24000)
    assert abs(first.audio.shape[0] / first.sample_rate - 9 / 24) < 0.05  # as long as the video
    assert first.settings.seed == 3
    assert first.settings.guidance == pipe.defaults.guidance
    assert set(first.timings) == {"prompt_encoding", "denoising", "video_decoding", "audio_decoding"}
    assert first.forwards[12].forwards == 2  # 2 steps at 2 x 2 x 3 latents, all guidance passes batched

    assert set(again.timings) == {"prompt_encoding", "denoising", "decoding_and_mp4_writing"}

    path = tmp_path / "fox.mp4"
    first.save(path)
    # x264 on frame threads is not bit-reproducible when the CPU is contended, so the two files are compared
    # decoded: the same audio, and each written frame nearest its own source frame (all of them, in order)
    written, saved = decoded(streamed), decoded(path)
    np.testing.assert_array_equal(written["audio"], saved["audio"])
    errors = np.abs(written["video"][:, None].astype(np.int16) - again.video[None].astype(np.int16)).mean(
        axis=(2, 3, 4)
    )
    assert list(errors.argmin(axis=1)) == list(range(len(again.video)))
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert sum(1 for _ in container.decode(video=0)) == 9
        assert (stream.width, stream.height, float(stream.average_rate)) == (96, 64, 24.0)
        assert container.streams.audio[0].sample_rate == 24000


def test_the_audio_decoder_compiles_beside_the_video_decoder(pipe, monkeypatch):
    """After the video decoder, the audio decoder (48 s to compile beside a production-size denoising
    on an H200) was not compiled when decoding began; the thread of stage 2's programs is idle sooner
    (with a stage 2: tests/test_compile_ahead.py)."""
    sequences = []
    submit = pipe._compiler.submit

    def recording(*submitted):
        sequences.append([[getattr(c, "func", c).__qualname__ for c in sequence] for sequence in submitted])
        return submit(*submitted)

    monkeypatch.setattr(pipe._compiler, "submit", recording)
    pipe("a red fox", seed=3, **SMALL)
    (submitted,) = sequences
    assert submitted == [["AudioDecoding.compile_ahead"], ["VideoDecoding.compile_ahead"]]  # one stage: no stage 2


def test_embeddings_prompt_and_no_guidance(pipe):
    """Contexts instead of text; without CFG no negative prompt is needed."""
    prompt, negative = pipe.encode("a fox", GenerationSettings(guidance=Guidance()))
    assert negative is None
    out = pipe(prompt, guidance=Guidance(), **SMALL)
    assert out.video.shape == (9, 64, 96, 3)
    with pytest.raises(ValueError, match="pass negative_prompt=PromptEmbeddings"):
        pipe(prompt, **SMALL)


def unused(*_, **__):
    raise AssertionError("device work started before the arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"height": 0}, ValueError, "height=0 must be a positive multiple of 32"),
        ({"height": 64.0}, TypeError, "height must be an integer"),
        ({"num_frames": 10}, ValueError, r"num_frames=10 must be 8k\+1"),
        ({"frame_rate": float("inf")}, ValueError, "frame_rate must be a finite number"),
        ({"num_inference_steps": 1}, ValueError, "at least 2"),
        ({"seed": "1"}, TypeError, "seed must be an integer"),
        ({"images": [ImageCondition("missing.png", 0, 1.0)]}, FileNotFoundError, "missing.png"),
        ({"images": [ImageCondition("missing.png", 9, 1.0)]}, ValueError, "frame_idx=9 is outside the 9 frames"),
        (
            {"images": [ImageCondition("missing.png", 0, 1.0, 52)]},
            ValueError,
            r"crf=52 must be an integer in \[0, 51\]",
        ),
        ({"images": [ImageCondition("missing.png", 0, 1.5)]}, ValueError, r"strength=1.5 must lie in \[0, 1\]"),
        ({"images": ["missing.png"]}, TypeError, "ImageCondition"),
        ({"guidance": MultiModalGuiderParams()}, TypeError, "guidance must be a Guidance"),
        ({"prompt": ""}, ValueError, "prompt must be a non-empty string"),
        ({"prompt": PromptEmbeddings(np.zeros((1, 4, 3)), None)}, ValueError, r"prompt.video must be a \(1, S, 64\)"),
        ({"negative_prompt": PromptEmbeddings(None, None)}, TypeError, "negative_prompt must be text"),
        ({"output_path": ROOT}, IsADirectoryError, "is a directory; give the mp4's file name"),
        ({"output_path": ROOT / "no-such-folder" / "x.mp4"}, FileNotFoundError, "no-such-folder' does not exist"),
    ],
)
def test_bad_arguments_raise_before_device_work(pipe, monkeypatch, kwargs, error, message):
    monkeypatch.setattr(pipe, "_components", None)  # a flow reaching the models would fail otherwise
    monkeypatch.setattr(pipe, "_decode_video", unused)
    kwargs = {"prompt": "a fox", **SMALL, **kwargs}
    with pytest.raises(error, match=message):
        pipe(kwargs.pop("prompt"), **kwargs)


class RecordingPredictor(DurationPredictor):
    """A duration predictor that records what it is asked."""

    def __init__(self, head) -> None:
        super().__init__(head)
        self.calls = []

    def __call__(self, video, audio, **bounds):
        self.calls.append((video, audio, bounds))
        return super().__call__(video, audio, **bounds)


@pytest.fixture
def duration():
    """A random duration head for the embedded model's contexts."""
    return RecordingPredictor(duration_head_from_config(EMBEDDED_CONFIG, rngs=nnx.Rngs(0)))


def test_auto_duration_takes_the_frames_the_duration_head_predicts(pipe, duration, monkeypatch):
    monkeypatch.setattr(pipe, "duration", duration)
    small = {name: value for name, value in SMALL.items() if name != "num_frames"}
    prompt, _ = pipe.encode("a fox", GenerationSettings(guidance=Guidance()))
    out = pipe(prompt, guidance=Guidance(), auto_duration=(0.3, 0.5), **small)
    ((video, audio, bounds),) = duration.calls
    assert video is prompt.video
    assert audio is prompt.audio
    assert bounds == {"frame_rate": 24.0, "min_seconds": 0.3, "max_seconds": 0.5}
    frames = DurationPredictor.__call__(duration, video, audio, **bounds)
    assert out.settings.num_frames == frames == out.video.shape[0] == 9
    assert out.settings.auto_duration is None
    # left out, the frame count is the head's over 1.2.0's default bounds; given, it is kept
    assert GenerationSettings().with_duration_head(pipe.flow, True).auto_duration == (1.0, 20.0)
    assert GenerationSettings(num_frames=9).with_duration_head(pipe.flow, True).auto_duration is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"auto_duration": (0.5, 0.3)}, r"the minimum 0.5 s is above the maximum"),
        ({"auto_duration": (float("nan"), 1.0)}, "must be two positive seconds"),
        ({"auto_duration": (0.3, 0.5), "num_frames": 9}, "both given: keep one"),
    ],
)
def test_bad_auto_durations_raise_before_device_work(pipe, duration, monkeypatch, kwargs, message):
    monkeypatch.setattr(pipe, "duration", duration)
    monkeypatch.setattr(pipe, "_components", None)
    small = {name: value for name, value in SMALL.items() if name != "num_frames"}
    with pytest.raises(ValueError, match=message):
        pipe("a fox", **{**small, **kwargs})
    assert not duration.calls


def test_auto_duration_without_a_duration_head_is_refused(pipe):
    with pytest.raises(ValueError, match=r"needs LTX-2.5's duration head: pass duration_head_path"):
        pipe("a fox", auto_duration=(0.3, 0.5), height=64, width=96)


def test_bad_construction_raises_before_loading(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint_path=.*must be an existing .safetensors file"):
        ltx_jax.LTXPipeline.from_checkpoint(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError, match="flow must be one of"):
        ltx_jax.LTXPipeline.embedded(flow="three-stage")
    with pytest.raises(ValueError, match="divisible by the mesh size"):
        ltx_jax.LTXPipeline.embedded(mesh=make_mesh(3))
    with pytest.raises(ValueError, match="strategy must be one of"):
        ltx_jax.LTXPipeline.embedded(strategy="sideways")
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        ltx_jax.LTXPipeline.embedded(mesh=8)


def test_distilled_flow_refuses_steps_and_guidance():
    settings = GenerationSettings(num_inference_steps=4)
    defaults = ltx_jax.pipeline.defaults.EMBEDDED_DEFAULTS
    with pytest.raises(ValueError, match="num_inference_steps .* given: the distilled flow runs fixed sigmas"):
        settings.resolve(defaults, "distilled")
    assert GenerationSettings().resolve(defaults, "distilled").guidance == Guidance()


def imports_of(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The ltx_jax modules `path` imports, at module level or inside functions (`from pkg import sub`
    imports the module `pkg.sub`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ltx_jax"):
            named = {f"{node.module}.{alias.name}" for alias in node.names}
            found.update(named & modules)
            if named - modules:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("ltx_jax"))
    return found


def test_library_has_no_import_cycle_and_no_argparse():
    """Every import counts, function-level ones too (they only hide a cycle). A package's `__init__`
    is its own node: `from ltx_jax.parallel import X` depends on it, `ltx_jax.parallel.mesh` does not."""
    modules = {}
    for path in sorted((ROOT / "ltx_jax").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {name: imports_of(path, set(modules)) & set(modules) - {name} for name, path in modules.items()}
    for name, path in modules.items():
        if name.startswith("ltx_jax.cli"):  # the command line parses flags; the library below it does not
            continue
        assert "argparse" not in {a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import)
                                  for a in n.names}, f"{name} imports argparse"  # fmt: skip
    state = {}

    def visit(name, trail):
        state[name] = "open"
        for target in sorted(graph[name]):
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*trail, name, target])}"
            if target not in state:
                visit(target, [*trail, name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_prompts_encoded_ahead_then_the_text_encoder_released(pipe):
    """`encode` gives what a call encodes first; after `release_text_encoder` the encoder is gone (nothing
    else holds it, so its weights are freed), its contexts give the text prompt's video, and text raises."""
    settings = GenerationSettings(seed=3, **SMALL)
    from_text = pipe.generate("a red fox", settings)
    context, negative = pipe.encode("a red fox", settings)
    encoder = weakref.ref(pipe._prompt_encoder)
    pipe.release_text_encoder()
    gc.collect()
    assert encoder() is None
    np.testing.assert_array_equal(pipe.generate(context, settings, negative_prompt=negative).video, from_text.video)
    with pytest.raises(ValueError, match="release_text_encoder"):
        pipe("a red fox", **SMALL)


def test_a_prompt_enhanced_twice_is_refused_before_device_work(pipe, monkeypatch):
    monkeypatch.setattr(pipe, "_components", None)
    settings = GenerationSettings(enhance_prompt=True, **SMALL)
    with pytest.raises(ValueError, match="enhanced_prompt is the text of a prompt enhanced ahead"):
        pipe.generate("a fox", settings, enhanced_prompt="a fox, enhanced")
