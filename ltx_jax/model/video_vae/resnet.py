"""Residual blocks of the video VAE, optionally timestep-conditioned (decoder).

Source: `ltx_core/model/video_vae/resnet.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.common.normalization import GroupNorm
from ltx_jax.model.normalization import Identity
from ltx_jax.model.timestep_embedding import PixArtAlphaCombinedTimestepSizeEmbeddings
from ltx_jax.model.video_vae.convolution import CausalConv3d, make_linear_nd
from ltx_jax.model.video_vae.enums import NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.normalization import make_norm


def check_no_noise_injection(inject_noise: bool) -> None:
    if inject_noise:
        raise ValueError(
            "inject_noise=True (StyleGAN-style spatial noise inside the VAE resnets) is not ported: no LTX-2 "
            "checkpoint config enables it. Set inject_noise to false in the block config."
        )


class ResnetBlock3D(nnx.Module):
    """`x + conv2(act(norm2(conv1(act(norm1(x))))))` on (B, C_in, F, H, W) -> (B, C_out, F, H, W).

    With `timestep_conditioning`, `scale_shift_table` (4, C_in) plus the caller's (B, 4 * C_in)
    embedding gives shift/scale after norm1 and norm2. When C_in != C_out the skip is
    `conv_shortcut(norm3(x))` with a 1-group GroupNorm.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int | None = None,
        *,
        groups: int = 32,
        eps: float = 1e-6,
        norm_layer: NormLayerType,
        inject_noise: bool = False,
        timestep_conditioning: bool = False,
        spatial_padding_mode: PaddingModeType,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        check_no_noise_injection(inject_noise)
        out_channels = in_channels if out_channels is None else out_channels
        conv = {"spatial_padding_mode": spatial_padding_mode, "rngs": rngs, "param_dtype": param_dtype}
        self.norm1 = make_norm(norm_layer, in_channels, groups=groups, eps=eps, param_dtype=param_dtype)
        self.conv1 = CausalConv3d(in_channels, out_channels, 3, **conv)
        self.norm2 = make_norm(norm_layer, out_channels, groups=groups, eps=eps, param_dtype=param_dtype)
        self.conv2 = CausalConv3d(out_channels, out_channels, 3, **conv)
        if in_channels != out_channels:
            self.conv_shortcut = make_linear_nd(in_channels, out_channels, rngs=rngs, param_dtype=param_dtype)
            self.norm3 = GroupNorm(1, in_channels, eps=eps, param_dtype=param_dtype)
        else:
            self.conv_shortcut, self.norm3 = Identity(), Identity()
        self.timestep_conditioning = timestep_conditioning
        if timestep_conditioning:
            self.scale_shift_table = nnx.Param(jnp.zeros((4, in_channels), param_dtype))

    def __call__(self, x: jax.Array, causal: bool = True, timestep: jax.Array | None = None) -> jax.Array:
        """`timestep`: the block's (B, 4 * C_in) embedding, required with timestep conditioning."""
        h = self.norm1(x)
        if self.timestep_conditioning:
            if timestep is None:
                raise ValueError("ResnetBlock3D has timestep_conditioning=True; pass its timestep embedding.")
            ada = self.scale_shift_table[...].astype(h.dtype)[None] + timestep.reshape(x.shape[0], 4, -1)
            shift1, scale1, shift2, scale2 = (ada[:, i, :, None, None, None] for i in range(4))
            h = h * (1 + scale1) + shift1
        h = self.conv1(jax.nn.silu(h), causal=causal)
        h = self.norm2(h)
        if self.timestep_conditioning:
            h = h * (1 + scale2) + shift2
        h = self.conv2(jax.nn.silu(h), causal=causal)
        return self.conv_shortcut(self.norm3(x)) + h


class UNetMidBlock3D(nnx.Module):
    """`num_layers` same-width `ResnetBlock3D`s sharing one timestep embedder (`time_embedder`,
    embedding_dim 4 * C) when timestep-conditioned: (B, C, F, H, W) -> same shape."""

    def __init__(
        self,
        in_channels: int,
        *,
        num_layers: int,
        resnet_eps: float = 1e-6,
        resnet_groups: int = 32,
        norm_layer: NormLayerType,
        inject_noise: bool = False,
        timestep_conditioning: bool = False,
        spatial_padding_mode: PaddingModeType,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype,
    ) -> None:
        self.timestep_conditioning = timestep_conditioning
        if timestep_conditioning:
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(
                in_channels * 4, rngs=rngs, param_dtype=param_dtype
            )
        self.res_blocks = nnx.List(
            [
                ResnetBlock3D(
                    in_channels,
                    in_channels,
                    groups=resnet_groups,
                    eps=resnet_eps,
                    norm_layer=norm_layer,
                    inject_noise=inject_noise,
                    timestep_conditioning=timestep_conditioning,
                    spatial_padding_mode=spatial_padding_mode,
                    rngs=rngs,
                    param_dtype=param_dtype,
                )
                for _ in range(num_layers)
            ]
        )

    def __call__(self, x: jax.Array, causal: bool = True, timestep: jax.Array | None = None) -> jax.Array:
        """`timestep`: (B,) already-scaled timesteps, required with timestep conditioning."""
        embedding = None
        if self.timestep_conditioning:
            if timestep is None:
                raise ValueError("UNetMidBlock3D has timestep_conditioning=True; pass the (B,) scaled timesteps.")
            embedding = self.time_embedder(timestep.reshape(-1), hidden_dtype=x.dtype)
        for block in self.res_blocks:
            x = block(x, causal=causal, timestep=embedding)
        return x
