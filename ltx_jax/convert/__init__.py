"""PyTorch state dicts and checkpoints -> ltx-jax parameters."""
