"""The `ltx-jax` command: `ltx-jax generate ...`, `ltx-jax convert ...` and `ltx-jax serve ...`.

Each subcommand parses its flags into the library's typed options and calls the library; the
checks, the loading order and the cluster logic live in the library and in `generate`'s process
setup. `python scripts/generate.py` and `python scripts/convert_checkpoint.py` run the same code.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

from ltx_jax.interrupts import exit_now

COMMANDS = {  # subcommand -> (module, one line for the usage)
    "generate": ("ltx_jax.cli.generate", "generate a video (the embedded tiny model without --checkpoint-path)"),
    "convert": ("ltx_jax.cli.convert", "convert an official .safetensors DiT into an Orbax checkpoint"),
    "serve": ("ltx_jax.cli.serve", "serve an OpenAI-style video API and a web page, the models loaded once"),
}


def usage() -> str:
    lines = [f"  {name:<10}{summary}" for name, (_, summary) in COMMANDS.items()]
    return "usage: ltx-jax {" + ",".join(COMMANDS) + "} ...\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Runs `ltx-jax COMMAND ...`; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"{usage()}\nerror: unknown command {argv[0]!r}; choose one of {', '.join(COMMANDS)}.", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return module.main(argv[1:], prog=f"ltx-jax {argv[0]}") or 0


def console_main() -> NoReturn:
    """The `ltx-jax` console script: `main()`, then the process ends at once (`ltx_jax.interrupts.exit_now`)."""
    exit_now(main())
