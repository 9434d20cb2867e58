"""The ``callboard`` command: ``serve``, ``repl`` and the small commands.

Each sub-module registers its sub-commands through ``add_parsers(subparsers)``;
a sub-command's ``func(args) -> int`` is its exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .._version import __version__

__all__ = ["build_parser", "main"]

_MODULES = (
    "_serve",
    "_commands",
    "_verbs_operator",
    "_jobs",
    "_task",
    "_repl",
    "_token",
    "_output",
    "_verbs_attach",
    "_nodes",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="callboard", description="A durable actor runtime for AI-agent workloads."
    )
    parser.add_argument("--version", action="version", version=f"callboard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        module.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)
