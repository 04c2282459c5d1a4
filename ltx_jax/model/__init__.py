"""The DiT as Flax NNX modules, one file per ltx-core module."""
