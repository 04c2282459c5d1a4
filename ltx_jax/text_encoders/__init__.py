"""Text encoders: the LTX-side modules that turn Gemma hidden states into DiT contexts."""
