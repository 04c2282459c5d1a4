"""`python scripts/generate.py ...` is `ltx-jax generate ...` (ltx_jax/cli/generate.py): see its --help."""

from ltx_jax.cli.generate import main

if __name__ == "__main__":
    main(prog="generate.py")
