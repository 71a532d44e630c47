"""The re-audit of ``autoreg fix --write``: every target audited again in one fresh process.

``python -m autoreg._fix.reaudit '[["pkg.mod:build", ["--forward"]], ...]'`` runs, for each
target, what ``autoreg audit TARGET`` with those options runs (the same code, the same report
and exit status), and prints one JSON list: each target's report, status and usage error. A
fresh process, because the rewritten files must be imported anew (importing a user's modules a
second time in one process is not sound); one process for all targets, so that torch and the
project are imported once.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from .. import _audit_cli
from .._cli import EXIT_USAGE, UsageError, parser

__all__ = ["main"]

# The command line's own parser: each target's arguments are what `autoreg audit` gives it.
_PARSER = parser()


def main(argv: list[str]) -> None:
    """Audit each ``[target, options]`` of the JSON list ``argv[0]``; print the results."""
    results = []
    for target, options in json.loads(argv[0]):
        args = _PARSER.parse_args(["audit", target, *options])
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                status, error = _audit_cli.run(args), ""
        except UsageError as usage:
            status, error = EXIT_USAGE, str(usage)
        results.append(
            {"target": target, "report": out.getvalue(), "status": status, "error": error}
        )
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
