"""The tiny model of the GPU sequence-parallel tests (test_gpu.py, test_ffi.py and the ffi worker):
head dims that are multiples of 8, as cuDNN needs. Imports nothing from torch, so worker processes
stay light."""

import ltx_jax

SP_CFG = ltx_jax.LTXConfig.tiny(
    num_attention_heads=8,
    attention_head_dim=16,
    cross_attention_dim=128,
    audio_num_attention_heads=8,
    audio_attention_head_dim=8,
    audio_cross_attention_dim=64,
)
