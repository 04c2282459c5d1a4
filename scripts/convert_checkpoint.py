"""`python scripts/convert_checkpoint.py ...` is `ltx-jax convert ...` (ltx_jax/cli/convert.py): see its --help."""

import sys

from ltx_jax.cli.convert import main

if __name__ == "__main__":
    sys.exit(main(prog="convert_checkpoint.py"))
