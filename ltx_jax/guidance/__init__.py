"""Guidance helpers: attention perturbations (STG, modality guidance)."""
