"""The command line, ``autoreg`` (or ``python -m autoreg``): its subcommands, from one list.

Each subcommand is a module with ``add_parser(subparsers)``, which adds its parser, and
``run(args) -> int``, which runs it and returns the exit status (``_target``: 0 clean, 1
findings, 2 usage error). ``main`` turns every ``UsageError`` (and a bad ``AUTOREG_MODE``) into
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Final

from . import _audit_cli
from ._config import environment_mode
from ._errors import ConfigurationError
from ._fix import cli as _fix_cli
from ._messages.cli import CLI_DESCRIPTION, USAGE_ERROR
from ._target import EXIT_USAGE, UsageError, prog

__all__ = ["main"]

# The subcommands, in the order --help lists them.
COMMANDS: Final = (_audit_cli, _fix_cli)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = argparse.ArgumentParser(prog=prog(), description=CLI_DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runs: dict[str, Callable[[argparse.Namespace], int]] = {}
    for command in COMMANDS:
        known = set(subparsers.choices)
        command.add_parser(subparsers)
        runs.update(dict.fromkeys(set(subparsers.choices) - known, command.run))
    args = parser.parse_args(argv)
    try:
        environment_mode()  # a bad AUTOREG_MODE is a usage error, before anything is built
        return runs[args.command](args)
    except UsageError as error:
        return _usage_error(args.command, str(error))
    except ConfigurationError as error:  # its message spans lines: one line here
        return _usage_error(args.command, " ".join(str(error).splitlines()))


def _usage_error(command: str, message: str) -> int:
    print(USAGE_ERROR.format(prog=prog(), command=command, message=message), file=sys.stderr)
    return EXIT_USAGE
