"""Prompt enhancement speed: Gemma 3 12B generation in ltx-jax against transformers' `generate` (issue #25).

    python benchmarks/bench_enhance.py write GEMMA_DIR [--layers N]      # random weights, real shapes
    python benchmarks/bench_enhance.py ltx-jax GEMMA_DIR [--new-tokens 512] [--prompt-tokens 1024]
    python benchmarks/bench_enhance.py transformers GEMMA_DIR [...]      # in another process, same GPU

Both generate from the same random prompt ids (as long as ltx-core's system prompt and a user prompt
are in Gemma's tokenizer, about 1,000 tokens), sampling as ltx-core enhances (temperature 0.7, top 50),
exactly `--new-tokens` tokens (no stop token: random weights would stop anywhere). Each prints one
JSON line: load seconds; warm prefill (one new token) and full-generation seconds, from which decode
tokens per second = (new tokens - 1) / (full - prefill); ltx-jax's compile seconds (first call minus
warm); the image features of one 896 x 896 image (vision tower + projector), warm; peak GPU memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLING = {"temperature": 0.7, "top_k": 50}


def prompt_ids(count: int, vocab: int) -> list[int]:
    """BOS, then ordinary token ids drawn at random (seeded): the same prompt for both implementations."""
    return [2, *np.random.default_rng(0).integers(300, vocab - 1000, count - 1).tolist()]


def timed(work: Any) -> tuple[Any, float]:  # noqa: ANN401
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def run_ltx_jax(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    from ltx_jax.text_encoders.gemma.encoders import GemmaTextEncoder  # noqa: PLC0415
    from ltx_jax.text_encoders.gemma.encoders.gemma3_generate import Gemma3Generator, Sampling  # noqa: PLC0415
    from ltx_jax.text_encoders.gemma.prompt_enhancer import PromptEnhancer  # noqa: PLC0415

    encoder, load_s = timed(lambda: GemmaTextEncoder.from_root(root, param_dtype=jnp.bfloat16))
    enhancer = PromptEnhancer.from_root(root, encoder)
    generator = Gemma3Generator(encoder.model, stop_token_ids=())
    ids = prompt_ids(args.prompt_tokens, encoder.model.config.vocab_size)
    sampling = Sampling(**SAMPLING)

    def generate(new_tokens: int) -> float:
        out, seconds = timed(lambda: generator.generate(ids, max_new_tokens=new_tokens, sampling=sampling, seed=1))
        assert len(out.tokens) == new_tokens
        return seconds

    first_prefill, first_full = generate(1), generate(args.new_tokens)
    prefill, full = min(generate(1) for _ in range(3)), min(generate(args.new_tokens) for _ in range(2))
    pixels = enhancer.vision.pixel_values(np.random.default_rng(0).integers(0, 256, (720, 1280, 3), np.uint8))
    _, vision_first = timed(lambda: enhancer.vision.features(jnp.asarray(pixels)).block_until_ready())
    _, vision = timed(lambda: enhancer.vision.features(jnp.asarray(pixels)).block_until_ready())
    stats = jax.devices()[0].memory_stats() or {}
    return {
        "impl": "ltx-jax", "jax": jax.__version__, "load_s": load_s, "prefill_s": prefill, "full_s": full,
        "compile_s": first_prefill + first_full - prefill - full, "vision_s": vision, "vision_first_s": vision_first,
        "peak_gib": stats.get("peak_bytes_in_use", 0) / 2**30,
    }  # fmt: skip


def run_transformers(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    from transformers import Gemma3ForConditionalGeneration  # noqa: PLC0415

    def load() -> Any:  # noqa: ANN401
        model = Gemma3ForConditionalGeneration.from_pretrained(
            root, torch_dtype=torch.bfloat16, device_map=args.torch_device
        )
        sync()
        return model.eval()

    def sync() -> None:
        if args.torch_device == "cuda":
            torch.cuda.synchronize()

    model, load_s = timed(load)
    ids = torch.tensor([prompt_ids(args.prompt_tokens, model.config.text_config.vocab_size)], device=args.torch_device)

    def generate(new_tokens: int) -> float:
        def work() -> torch.Tensor:
            torch.manual_seed(1)
            with torch.inference_mode():
                out = model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                    min_new_tokens=new_tokens, do_sample=True, **SAMPLING,
                )  # fmt: skip
            sync()
            return out

        out, seconds = timed(work)
        assert out.shape[1] == ids.shape[1] + new_tokens
        return seconds

    generate(1)  # CUDA and cuBLAS start-up
    prefill, full = min(generate(1) for _ in range(3)), min(generate(args.new_tokens) for _ in range(2))
    size = model.config.vision_config.image_size
    pixels = torch.randn(1, 3, size, size, device=args.torch_device, dtype=torch.bfloat16)

    def vision() -> None:
        with torch.inference_mode():
            model.model.get_image_features(pixels)
        sync()

    _, vision_first = timed(vision)
    _, vision_s = timed(vision)
    return {
        "impl": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
        "load_s": load_s, "prefill_s": prefill, "full_s": full, "vision_s": vision_s, "vision_first_s": vision_first,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if args.torch_device == "cuda" else 0.0,
    }  # fmt: skip


def write(root: Path, layers: int | None) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from synthetic_gemma import gemma_config, write_gemma  # noqa: PLC0415

    _, seconds = timed(lambda: write_gemma(root, gemma_config(layers), seed=0, workers=8, shard_bytes=5 * 2**30))
    return {"written_s": seconds, "layers": layers or 48}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("write", "ltx-jax", "transformers"))
    parser.add_argument("gemma_root", type=Path)
    parser.add_argument("--layers", type=int, help="write: Gemma text layers (default all 48)")
    parser.add_argument("--new-tokens", type=int, default=512, help="tokens generated (ltx-core's maximum: 512)")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length in tokens")
    parser.add_argument("--torch-device", default="cuda", help="transformers: the torch device (default cuda)")
    args = parser.parse_args()
    if args.what == "write":
        result = write(args.gemma_root, args.layers)
    else:
        run = run_ltx_jax if args.what == "ltx-jax" else run_transformers
        result = run(args.gemma_root, args)
        result.update(new_tokens=args.new_tokens, prompt_tokens=args.prompt_tokens)
        result["decode_tokens_per_s"] = (args.new_tokens - 1) / (result["full_s"] - result["prefill_s"])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
