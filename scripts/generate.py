"""`python scripts/generate.py ...` is `ltx-jax generate ...` (ltx_jax/cli/generate.py): see its --help."""

from ltx_jax.cli.generate import main
from ltx_jax.interrupts import exit_now

if __name__ == "__main__":
    main(prog="generate.py")
    exit_now(0)  # errors and interruptions have ended the process already
