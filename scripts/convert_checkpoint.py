"""`python scripts/convert_checkpoint.py ...` is `ltx-jax convert ...` (ltx_jax/cli/convert.py): see its --help."""

from ltx_jax.cli.convert import main
from ltx_jax.interrupts import exit_now

if __name__ == "__main__":
    exit_now(main(prog="convert_checkpoint.py"))
