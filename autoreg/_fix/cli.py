"""``autoreg fix TARGET... [--style base|buffer] [--write]``: the command line of the codemod.

Each TARGET (``package.module:factory``, as for ``autoreg audit``) is built while ``sites``
records where its attributes are stored, then audited: ``find_unregistered``, and
``audit_forward`` when the factory returns ``(model, args[, kwargs])``. The findings become a plan
(``collect``, ``plan``), the plan a rewrite of each file (``codemod``).

Without ``--write``: the unified diff on stdout, what is left to edit by hand on stderr; exit 1
when the diff is not empty, 0 when nothing needs changing. With ``--write``: the files are
rewritten, then each target is audited again by ``python -m autoreg audit`` in a fresh process;
exit 0 when every target is now clean, 1 when something is still left behind. Exit 2 for a usage
error (as ``audit``), and when LibCST is not installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import torch

from .._errors import ForwardAuditError
from .._forward_audit import ForwardFinding, audit_forward
from .._messages.cli import FORWARD_FAILED
from .._messages.fix import (
    FIX_CLEAN,
    FIX_DESCRIPTION,
    FIX_FORWARD_STRAYS,
    FIX_GAINS_STATE,
    FIX_HAND_HEADER,
    FIX_HELP,
    FIX_NO_LIBCST,
    FIX_NOT_CLEAN,
    FIX_NOTHING,
    FIX_REAUDIT,
    FIX_REAUDIT_FAILED,
    FIX_STYLE_HELP,
    FIX_TARGET_HELP,
    FIX_WOULD_CHANGE,
    FIX_WRITE_HELP,
    FIX_WROTE,
)
from .._target import EXIT_CLEAN, EXIT_FINDINGS, UsageError, emit, load
from .collect import collect
from .edits import WrapModules
from .plan import Plan, make_plan
from .sites import record_stores
from .strays import Stray

if TYPE_CHECKING:
    from .codemod import Rewrite

__all__ = ["add_parser", "run"]

EXIT_CHANGES: Final = EXIT_FINDINGS  # without --write: the diff is not empty


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``fix`` command to the ``autoreg`` command line's ``subparsers``."""
    parser = subparsers.add_parser("fix", help=FIX_HELP, description=FIX_DESCRIPTION)
    parser.add_argument("targets", nargs="+", metavar="TARGET", help=FIX_TARGET_HELP)
    parser.add_argument("--style", choices=("base", "buffer"), default="base", help=FIX_STYLE_HELP)
    parser.add_argument("--write", action="store_true", help=FIX_WRITE_HELP)


def run(args: argparse.Namespace) -> int:
    """Run ``autoreg fix`` as parsed into ``args``; return the exit status."""
    try:
        from .codemod import rewrite  # imports libcst
    except ImportError as error:
        if error.name is None or error.name.partition(".")[0] != "libcst":
            raise
        raise UsageError(FIX_NO_LIBCST) from None
    strays: list[Stray] = []
    forward_targets: set[str] = set()
    made_by_forward = 0
    for target in args.targets:
        found, forward = _audit(target)
        strays += found
        if forward is not None:
            forward_targets.add(target)
            # What forward makes itself (not an attribute it read): never an edit of fix's.
            made_by_forward += sum(f.kind != "stored" and not f.entered for f in forward)
    plan = make_plan(strays, args.style, os.getcwd(), _libraries())
    rewrites: dict[str, tuple[bytes, Rewrite]] = {}
    for filename, edits in sorted(plan.edits.items()):
        source = Path(filename).read_bytes()
        result = rewrite(source, filename, edits)
        plan.hand += [h for h in result.hand if h not in plan.hand]
        if result.code != source:
            rewrites[filename] = (source, result)
    if args.write:
        _write(rewrites, plan)
    else:
        diff = "".join(
            "".join(_diff(filename, source, result.code, result.encoding))
            for filename, (source, result) in rewrites.items()
        )
        if diff:
            emit(diff.removesuffix("\n"))
    _report(plan, [result for _, result in rewrites.values()], made_by_forward)
    if not args.write:
        files = "file" if len(rewrites) == 1 else "files"
        done = FIX_WOULD_CHANGE.format(count=len(rewrites), files=files)
        print(done if rewrites else FIX_NOTHING, file=sys.stderr)
        return EXIT_CHANGES if rewrites else EXIT_CLEAN
    names = ", ".join(_short(name) for name in rewrites)
    print(FIX_WROTE.format(files=names) if rewrites else FIX_NOTHING, file=sys.stderr)
    return max(_reaudit(target, target in forward_targets) for target in args.targets)


def _write(rewrites: dict[str, tuple[bytes, Rewrite]], plan: Plan) -> None:
    """Write each rewritten file; move the hand edits to their lines in the new files."""
    for filename, (source, result) in rewrites.items():
        Path(filename).write_bytes(result.code)
        moved = _line_map(source.decode(result.encoding), result.code.decode(result.encoding))
        plan.hand = [
            dataclasses.replace(h, lineno=moved(h.lineno)) if h.filename == filename else h
            for h in plan.hand
        ]


def _report(plan: Plan, results: list[Rewrite], made_by_forward: int) -> None:
    """What the user should know besides the diff: state that joins ``state_dict()``, the hand
    edits, what forward makes that fix does not rewrite."""
    for edit in (edit for result in results for edit in result.made):
        if isinstance(edit, WrapModules):
            name = f"{edit.cls.qualname.rpartition('.')[2]}.{edit.attribute}"
            print(FIX_GAINS_STATE.format(name=name, container=edit.container), file=sys.stderr)
    _report_hand(plan)
    if made_by_forward:
        tensors = "tensor" if made_by_forward == 1 else "tensors"
        print(FIX_FORWARD_STRAYS.format(count=made_by_forward, tensors=tensors), file=sys.stderr)


def _audit(target: str) -> tuple[list[Stray], list[ForwardFinding] | None]:
    """Build ``target`` (recording its stores), audit it; the strays and forward findings
    (None when the factory returned no inputs)."""
    with record_stores() as stores:
        loaded = load(target)
    forward: list[ForwardFinding] | None = None
    if loaded.args is not None:
        try:
            forward = audit_forward(loaded.model, *loaded.args, **loaded.kwargs)
        except ForwardAuditError as error:
            raise UsageError(FORWARD_FAILED.format(target=target, error=error)) from None
    return collect(loaded.model, stores, forward or ()), forward


def _reaudit(target: str, forward: bool) -> int:
    """Audit ``target`` again in a fresh process; print its report; 0 clean, 1 not."""
    command = [sys.executable, "-m", "autoreg", "audit", target, *(["--forward"] * forward)]
    shown = " ".join(["python", *command[1:]])
    print(FIX_REAUDIT.format(command=shown), file=sys.stderr)
    sys.stderr.flush()
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode not in (EXIT_CLEAN, EXIT_CHANGES):
        output = (result.stdout + result.stderr).rstrip()
        print(
            FIX_REAUDIT_FAILED.format(target=target, code=result.returncode, output=output),
            file=sys.stderr,
        )
        return EXIT_CHANGES
    if result.stdout:
        emit(result.stdout.removesuffix("\n"))
    message = FIX_CLEAN if result.returncode == EXIT_CLEAN else FIX_NOT_CLEAN
    print(message.format(target=target), file=sys.stderr)
    return result.returncode


def _report_hand(plan: Plan) -> None:
    """The hand edits, one entry per line of code (names that share it joined)."""
    groups: dict[tuple[str, int, str, str], list[str]] = {}
    for item in plan.hand:
        names = groups.setdefault((item.filename, item.lineno, item.reason, item.edit), [])
        if item.name and item.name not in names:
            names.append(item.name)
    if not groups:
        return
    print(FIX_HAND_HEADER.format(count=len(groups)), file=sys.stderr)
    for (filename, lineno, reason, edit), names in sorted(groups.items()):
        where = f"{_short(filename)}:{lineno}" if lineno else _short(filename)
        subject = f"{', '.join(names)}: " if names else ""
        print(f"  {where}: {subject}{reason}\n      {edit}", file=sys.stderr)


def _diff(filename: str, old: bytes, new: bytes, encoding: str) -> list[str]:
    name = _short(filename)
    return list(
        difflib.unified_diff(
            old.decode(encoding).splitlines(keepends=True),
            new.decode(encoding).splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
    )


def _line_map(old: str, new: str) -> Callable[[int], int]:
    """Where each line of ``old`` is in ``new`` (a changed line: where its change starts)."""
    blocks = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines()).get_opcodes()

    def moved(lineno: int) -> int:
        for tag, i1, i2, j1, _ in blocks:
            if i1 < lineno <= i2:  # old lines i1 + 1 .. i2
                return j1 + (lineno - i1 if tag == "equal" else 1)
        return lineno

    return moved


def _libraries() -> list[str]:
    """Directories never edited, even under the working directory: installed packages, the
    standard library, torch and autoreg."""
    paths = sysconfig.get_paths()
    found = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    found |= {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))}
    return sorted(found)


def _short(filename: str) -> str:
    """``filename`` relative to the working directory when it lies under it."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
