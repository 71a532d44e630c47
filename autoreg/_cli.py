"""The command line, ``autoreg`` (or ``python -m autoreg``): its parser, and what every command
shares. This module never imports torch.

``autoreg --help``, ``--version`` and a command line argparse refuses answer at once: the parser is
built here from the messages alone (``_messages``, which need no torch), and a command's module -
which imports torch - is imported only to run it (``COMMANDS``). Each command's module has
``run(args) -> int``, which returns the exit status, one rule for every command: 0 when everything
asked for was checked and nothing is left, 1 when something is (``EXIT_FINDINGS``), 2 for a command
line that cannot be run (``UsageError``). ``main`` turns every ``UsageError`` (and a bad
``AUTOREG_MODE``) into one line on stderr and exit status 2, never a traceback.

torch warns when numpy is missing ("Failed to initialize NumPy"), which autoreg does not need: the
commands run with that one warning silenced, so that it never reaches the report.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias

from . import __version__
from ._config import environment_mode
from ._errors import ConfigurationError
from ._messages.cli import (
    AUDIT_DESCRIPTION,
    AUDIT_FORWARD_HELP,
    AUDIT_HELP,
    AUDIT_JSON_HELP,
    AUDIT_LOW_PRECISION_HELP,
    AUDIT_MODE_HELP,
    AUDIT_STEP_HELP,
    AUDIT_TARGET_HELP,
    CLI_DESCRIPTION,
    FIX_LOW_PRECISION_HELP,
    USAGE_ERROR,
)
from ._messages.fix import (
    FIX_DESCRIPTION,
    FIX_HELP,
    FIX_STYLE_HELP,
    FIX_TARGET_HELP,
    FIX_WRITE_HELP,
)

__all__ = [
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "EXIT_USAGE",
    "LOW_PRECISIONS",
    "UsageError",
    "emit",
    "main",
    "parser",
    "prog",
]

EXIT_CLEAN: Final = 0  # everything audited, nothing found
EXIT_FINDINGS: Final = 1  # something found, or something that could not be audited (for CI)
EXIT_USAGE: Final = 2  # a command line that cannot be run, a target that cannot be built

# --low-precision: the dtype of the forward audit's second pass, by name (no torch here); "none"
# skips it.
LOW_PRECISIONS: Final = ("bfloat16", "float16", "none")


class UsageError(Exception):
    """A command line that cannot be run; its message is printed as one line, exit status 2."""


_Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _audit_arguments(subparsers: _Subparsers) -> None:
    command = subparsers.add_parser("audit", help=AUDIT_HELP, description=AUDIT_DESCRIPTION)
    command.add_argument("target", metavar="TARGET", help=AUDIT_TARGET_HELP)
    command.add_argument("--json", action="store_true", help=AUDIT_JSON_HELP)
    command.add_argument("--forward", action="store_true", help=AUDIT_FORWARD_HELP)
    command.add_argument("--step", metavar="FUNCTION", help=AUDIT_STEP_HELP)
    for mode in ("train", "eval"):
        command.add_argument(
            f"--{mode}", action="store_true", help=AUDIT_MODE_HELP.format(mode=mode)
        )
    command.add_argument("--low-precision", choices=LOW_PRECISIONS, help=AUDIT_LOW_PRECISION_HELP)


def _fix_arguments(subparsers: _Subparsers) -> None:
    command = subparsers.add_parser("fix", help=FIX_HELP, description=FIX_DESCRIPTION)
    command.add_argument("targets", nargs="+", metavar="TARGET", help=FIX_TARGET_HELP)
    command.add_argument("--style", choices=("base", "buffer"), default="base", help=FIX_STYLE_HELP)
    command.add_argument("--write", action="store_true", help=FIX_WRITE_HELP)
    command.add_argument(
        "--low-precision", choices=LOW_PRECISIONS, default="bfloat16", help=FIX_LOW_PRECISION_HELP
    )


# The commands, in the order --help lists them: the module that runs each, and its arguments.
COMMANDS: Final[dict[str, tuple[str, Callable[[_Subparsers], None]]]] = {
    "audit": ("autoreg._audit_cli", _audit_arguments),
    "fix": ("autoreg._fix.cli", _fix_arguments),
}


def parser() -> argparse.ArgumentParser:
    """The whole command line's parser (no torch imported)."""
    top = argparse.ArgumentParser(prog=prog(), description=CLI_DESCRIPTION)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for _, arguments in COMMANDS.values():
        arguments(subparsers)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = parser().parse_args(argv)
    try:
        environment_mode()  # a bad AUTOREG_MODE is a usage error, before anything is built
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            run: Any = importlib.import_module(COMMANDS[args.command][0]).run
            status: int = run(args)
        return status
    except UsageError as error:
        return _usage_error(args.command, str(error))
    except ConfigurationError as error:  # its message spans lines: one line here
        return _usage_error(args.command, " ".join(str(error).splitlines()))


def prog() -> str:
    """How the user ran it: the ``autoreg`` console script, or ``python -m autoreg``."""
    return "autoreg" if os.path.basename(sys.argv[0]) == "autoreg" else "python -m autoreg"


def users_code() -> contextlib.AbstractContextManager[Any]:
    """Around all that runs the user's code (the import, the factory, the forward, the step):
    what it prints goes to stderr, so that stdout carries the report only (``--json`` is read by
    programs)."""
    return contextlib.redirect_stdout(sys.stderr)


def emit(text: str) -> None:
    """Print ``text`` on stdout; when the reader has gone (``| head``), end quietly."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # What is still buffered would raise again when the interpreter flushes at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _usage_error(command: str, message: str) -> int:
    print(USAGE_ERROR.format(prog=prog(), command=command, message=message), file=sys.stderr)
    return EXIT_USAGE
