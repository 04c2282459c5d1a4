"""LTX-2.5's duration head and --auto-duration's frame rule against ltx-core / ltx-pipelines 1.2.0 (fixtures
recorded by tests/record_ltx25_fixtures.py)."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from ltx_core_twin import relative_error
from tolerances import FLOAT32

from ltx_jax.pipeline.duration import DurationPredictor, load_duration_predictor, seconds_to_clamped_num_frames

FIXTURES = Path(__file__).parent / "fixtures" / "ltx25"


@pytest.fixture(scope="module")
def head():
    """The head as `--duration-head-path` loads it (float32 here: the fixtures are)."""
    return load_duration_predictor(FIXTURES / "duration_head.safetensors", jnp.float32).head


def test_seconds_equal_ltx_core_1_2_0_for_either_stream_and_both(head):
    contexts, recorded = np.load(FIXTURES / "embeddings_processor.npz"), np.load(FIXTURES / "duration_head.npz")
    video, audio = jnp.asarray(contexts["video"]), jnp.asarray(contexts["audio"])
    for name, pair in (("both", (video, audio)), ("video", (video, None)), ("audio", (None, audio))):
        ours = np.stack([np.asarray(head(*(None if t is None else t[i : i + 1] for t in pair)))[0] for i in range(3)])
        assert relative_error(ours, recorded[f"seconds_{name}"]) <= FLOAT32, name


def test_frames_from_seconds_equal_ltx_pipelines_1_2_0():
    """Rounding half to even, the clamp, the floor to 8k + 1 and the raise past a minimum between grid points."""
    recorded = np.load(FIXTURES / "duration_head.npz")
    ours = [
        seconds_to_clamped_num_frames(s, frame_rate=fps, min_frames=round(lo * fps), max_frames=round(hi * fps))
        for s, fps, lo, hi in recorded["table"]
    ]
    assert ours == recorded["frames"].tolist()


def test_a_file_without_a_duration_head_is_refused_by_its_flag():
    with pytest.raises(ValueError, match=r"--duration-head-path.*holds no duration_head.\* tensors"):
        load_duration_predictor(FIXTURES / "ltx25_transformer.safetensors")


def test_predictor_refuses_a_batch_and_bad_bounds(head):
    predictor = DurationPredictor(head)
    video = jnp.asarray(np.load(FIXTURES / "embeddings_processor.npz")["video"])
    seconds = float(np.load(FIXTURES / "duration_head.npz")["seconds_video"][0])
    frames = predictor(video[:1], None, frame_rate=24.0, min_seconds=0.5, max_seconds=20.0)
    assert frames == seconds_to_clamped_num_frames(seconds, frame_rate=24.0, min_frames=12, max_frames=480)
    with pytest.raises(ValueError, match="one prompt at a time"):
        predictor(video[:2], None, frame_rate=24.0)
    with pytest.raises(ValueError, match="minimum 5.0 s is above its maximum 2.0 s"):
        predictor(video[:1], None, frame_rate=24.0, min_seconds=5.0, max_seconds=2.0)
    with pytest.raises(ValueError, match="positive finite"):
        predictor(video[:1], None, frame_rate=float("nan"))
    with pytest.raises(ValueError, match="needs video_tokens, audio_tokens or both"):
        head(None, None)
