"""Modules shared by the VAEs and the upsampler (ltx-core's `model/common`)."""
