"""Every numeric tolerance the tests use, in one place (DESIGN.md: a test states its tolerance once, as a named
constant, and never loosens it to pass). Relative errors are max|ours - reference| / max|reference| unless a
comment says otherwise. Import by name: `from tolerances import FLOAT32`."""

# DESIGN.md's parity bounds
FLOAT32 = 1e-5  # DESIGN.md: float32 parity, max|jax - torch| / max|torch|, for any module or whole loop
BF16 = 2e-2  # DESIGN.md: the bf16 model against the float32 reference
SP = 1e-5  # DESIGN.md: SP (any strategy, token count or process count) equals one device in float32
LSE = BF16  # absolute, on a block's log-sum-exp: an error e scales its merge weight by exp(e) ~ 1 + e

# float32 rounding where the arithmetic is the same op for op
ROPE_TABLE = 1e-6  # absolute, RoPE cos/sin in float32 from identical angles
ELEMENTWISE = 1e-6  # elementwise float32 math: XLA's CPU division and FMAs differ from torch's by an ulp or two
LOADED_PIXELS = 1e-5  # absolute, on [-1, 1] pixels decoded from the same file: float32 resize/normalize rounding
RESAMPLE_FLOAT64 = 1e-6  # resampling against torch's run in float64: the float32 rounding of our output
MEL_FLOAT32_REFERENCE = 5e-5  # log-mel against torch's float32 run: its 44.1 kHz resampling moves it by 2.5e-5
RESAMPLED_SINE = 1e-3  # absolute, a resampled sine against the sine at the new rate, away from the edges
# |logits - transformers'| / max|transformers'|: float32 rounding through 4 layers and 32 cached steps
# measures ~1e-6; a wrong position, mask or cache slot changes the logits by far more than 1e-4.
GEMMA_LOGITS = 1e-4
# a reference re-recorded on another CPU against its committed fixture: the same torch rounds last bits
# differently; measured between two x86 machines: 2e-7 for single modules, up to 1.6e-6 for whole flows (30
# denoising steps carry the difference); half FLOAT32, the bound the tests hold ltx-jax to against these fixtures
RECORDED_FIXTURE = 5e-6
SYNTHETIC_STD = 0.05  # relative: the sample std of a 0.02-std weight of >= 4096 values

# fp8 (no reference runs fp8: ours against an emulation doing the same rounding)
FP8_MATMUL = 1e-5  # rtol and atol, an fp8 linear against the emulated fp8 matmul: same operands, float32 sums
FP8_ATTENTION_RTOL = 1e-5  # fp8 attention against numpy doing the same rounding ...
FP8_ATTENTION_ATOL = 1e-6  # ... its absolute part
BF16_ROUNDING = 1e-2  # bf16 activations against the same op in float32: bf16's step (2^-7 relative) and a little
FP8_KERNEL_VS_FLOAT32 = 0.3  # cuDNN's fp8 attention (less v's mean) against float32: 0.12 emulated, 1.1 if x2
FP8_KERNEL_VS_EMULATION = 0.15  # cuDNN's fp8 kernel against `emulated_fp8_attention`, max not L2: 5e-2 probed
FP8_STEP = 2**-4  # one e4m3 step (3 mantissa bits): two separately compiled fp8 programs on the same tokens
