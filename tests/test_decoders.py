"""`ltx_jax.pipeline.decoders`: frames converted to uint8 on the device exactly as on the host; the mp4
written chunk by chunk as the frames are decoded."""

import jax.numpy as jnp
import numpy as np
import pytest

from ltx_jax.pipeline.decoders import frames_uint8
from ltx_jax.pipeline.media_io import Mp4Writer, video_to_uint8, write_mp4, write_mp4_chunks


def test_frames_uint8_on_the_device_equals_the_host_conversion():
    rng = np.random.default_rng(0)
    video = rng.uniform(-1.2, 1.2, (1, 3, 5, 16, 24)).astype(np.float32)
    # values whose scaled form lands on or next to an integer, where truncation decides the level
    levels = np.arange(256, dtype=np.float32) / np.float32(127.5) - np.float32(1.0)
    video.flat[:256] = levels
    video.flat[256:512] = np.nextafter(levels, np.float32(-2.0))
    np.testing.assert_array_equal(np.asarray(frames_uint8(jnp.asarray(video))), video_to_uint8(video[0]))
    bf16 = jnp.asarray(video, jnp.bfloat16)  # the DiT's dtype: converted to float32 first on both sides
    np.testing.assert_array_equal(np.asarray(frames_uint8(bf16)), video_to_uint8(np.asarray(bf16, np.float32)[0]))


def test_an_mp4_written_in_chunks_is_the_mp4_written_whole(tmp_path):
    """Same encoder, same frames: byte for byte the same file, whether the frames come at once or in
    chunks (device arrays among them, an empty one too); the frames and audio come back as numpy. x264
    on one thread: on several, its output can change with the timing when the CPU is contended."""
    frames = np.random.default_rng(0).integers(0, 256, (11, 32, 48, 3), dtype=np.uint8)
    audio = np.sin(np.linspace(0, 600, 2 * 11_000, dtype=np.float32)).reshape(2, -1) * 0.5
    tags = {"comment": "a red fox"}
    write_mp4_chunks(tmp_path / "whole.mp4", [frames], 24.0, audio, 24000, metadata=tags, threads=1)
    chunks = [frames[:0], jnp.asarray(frames[:4]), frames[4:]]
    joined, returned_audio = write_mp4_chunks(
        tmp_path / "chunks.mp4", chunks, 24.0, audio, 24000, metadata=tags, threads=1
    )
    assert (tmp_path / "chunks.mp4").read_bytes() == (tmp_path / "whole.mp4").read_bytes()
    np.testing.assert_array_equal(joined, frames)
    np.testing.assert_array_equal(returned_audio, audio)


def test_an_mp4_writer_names_a_misfit_and_leaves_nothing_after_an_error(tmp_path):
    frames = np.zeros((3, 32, 48, 3), np.uint8)
    with Mp4Writer(tmp_path / "kept.mp4", 24.0, 32, 48) as mp4:
        mp4.write_frames(frames)
        with pytest.raises(ValueError, match=r"frames must be \(n, 32, 48, 3\) uint8, got \(3, 32, 40, 3\)"):
            mp4.write_frames(frames[:, :, :40])
        with pytest.raises(ValueError, match="no audio track: give sample_rate="):
            mp4.write_audio(np.zeros(100, np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.mp4"]  # the errors were handled in the block

    def stopped_while_writing():
        with Mp4Writer(tmp_path / "stopped.mp4", 24.0, 32, 48) as mp4:
            mp4.write_frames(frames)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped_while_writing()
    with pytest.raises(ValueError, match="sample_rate must be positive when audio is given, got 0"):
        write_mp4(tmp_path / "no_rate.mp4", frames, 24.0, np.zeros(100, np.float32), 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.mp4"]


def test_save_names_a_folder_or_a_missing_folder_before_writing(tmp_path):
    from ltx_jax.pipeline.generated_video import GeneratedVideo

    out = GeneratedVideo(np.zeros((1, 32, 48, 3), np.uint8), None, 24.0, 0, None, None, None, {}, {})
    with pytest.raises(IsADirectoryError, match="save: path .* is a directory; give the mp4's file name"):
        out.save(tmp_path)
    with pytest.raises(FileNotFoundError, match="the folder .*missing' does not exist; create it"):
        out.save(tmp_path / "missing" / "out.mp4")
    assert list(tmp_path.iterdir()) == []
