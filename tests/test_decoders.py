"""`ltx_jax.pipeline.decoders`: frames converted to uint8 on the device exactly as on the host."""

import jax.numpy as jnp
import numpy as np

from ltx_jax.pipeline.decoders import frames_uint8
from ltx_jax.pipeline.media_io import video_to_uint8


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
