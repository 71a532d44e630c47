"""``autoreg fix TARGET... [--style base|buffer] [--write] [--low-precision DTYPE]``: the codemod.

Each TARGET (``package.module:factory``, as for ``autoreg audit``) is built, audited and run
(``analyse``; ``--low-precision`` as for ``autoreg audit --forward``); its strays become a plan
(``plan``), the plan a rewrite of each file (``codemod``).

Without ``--write``: the unified diff on stdout, what is left to edit by hand and what was not
audited on stderr. With ``--write``: the files are rewritten, then each target is audited again
by ``python -m autoreg audit`` in a fresh process. One exit status rule with ``autoreg audit``:
0 when everything was audited and nothing is left; 1 for a diff (dry run), an edit left to the
user, a finding of the re-audit (or of the forward, which fix never rewrites), or something not
audited; 2 for a usage error, and when LibCST is not installed. With nothing to rewrite, the dry
run and ``--write`` exit alike, and nothing is audited twice.

The re-audit needs a fresh process: the rewritten files must be imported anew, and importing a
user's modules a second time in one process is not sound (module-level registries that refuse a
class registered twice, ``from x import Y`` bindings held elsewhere, instances of the old classes).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .._audit_cli import low_precision
from .._audit_scope import NOT_OWN_DIRS
from .._cli import EXIT_CLEAN, EXIT_FINDINGS, UsageError, emit, users_code
from .._messages.fix import (
    FIX_CLEAN,
    FIX_FORWARD_STRAYS,
    FIX_GAINS_STATE,
    FIX_HAND_HEADER,
    FIX_NO_LIBCST,
    FIX_NOT_CLEAN,
    FIX_NOTHING,
    FIX_PUT_BACK,
    FIX_REAUDIT,
    FIX_REAUDIT_FAILED,
    FIX_WOULD_CHANGE,
    FIX_WROTE,
)
from .analyse import Analysis, analyse
from .collect import autoreg_keeps_complex
from .edits import WrapModules
from .plan import Plan, make_plan

if TYPE_CHECKING:
    from .codemod import Rewrite

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run ``autoreg fix`` as parsed into ``args``; return the exit status."""
    try:
        from .codemod import rewrite  # imports libcst
        from .elsewhere import with_stores_elsewhere  # so do these
        from .project import with_unloaded_subclasses, without_refused_bases
    except ImportError as error:
        if error.name is None or error.name.partition(".")[0] != "libcst":
            raise
        raise UsageError(FIX_NO_LIBCST) from None
    low = low_precision(args.low_precision)
    with users_code():
        analyses = [analyse(target, low) for target in args.targets]
    strays = [stray for analysis in analyses for stray in analysis.strays]
    if args.style == "buffer":  # a subclass the run did not load may store something else
        strays = with_unloaded_subclasses(strays, os.getcwd(), _libraries())
        # and a store through another name than self, in code the run saw or that names the class
        strays = with_stores_elsewhere(strays, os.getcwd(), _libraries())
    plan = make_plan(strays, args.style, os.getcwd(), _libraries(), autoreg_keeps_complex())
    if args.style == "base":  # a subclass the run did not load may break on autoreg's bases
        without_refused_bases(plan, os.getcwd(), _libraries())
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
    _report(plan, [result for _, result in rewrites.values()], analyses)
    for line in (line for analysis in analyses for line in analysis.not_audited):
        print(line, file=sys.stderr)
    # Left whatever is written: hand edits, what was not audited, what forward makes or takes.
    left = bool(plan.hand) or any(a.not_audited or a.left_by_forward for a in analyses)
    if not args.write or not rewrites:
        if args.write:
            print(FIX_NOTHING, file=sys.stderr)
        else:
            files = "file" if len(rewrites) == 1 else "files"
            done = FIX_WOULD_CHANGE.format(count=len(rewrites), files=files)
            print(done if rewrites else FIX_NOTHING, file=sys.stderr)
        return EXIT_FINDINGS if rewrites or left else EXIT_CLEAN
    names = ", ".join(_short(name) for name in rewrites)
    print(FIX_WROTE.format(files=names), file=sys.stderr)
    status, built = _reaudit(analyses, args.low_precision)
    if not built:  # every target was built here before the rewrite: the rewrite broke it
        # Put back only what still holds the rewrite: a file changed since is someone's edit.
        back = [f for f, (_, result) in rewrites.items() if _holds(f, result.code)]
        for filename in back:
            Path(filename).write_bytes(rewrites[filename][0])
        if back:
            shown = ", ".join(_short(name) for name in back)
            print(FIX_PUT_BACK.format(files=shown), file=sys.stderr)
        return EXIT_FINDINGS
    hand_left = bool(plan.hand) or any(a.not_audited for a in analyses)
    return max(status, EXIT_FINDINGS if hand_left else EXIT_CLEAN)


def _holds(filename: str, code: bytes) -> bool:
    """Whether ``filename`` still holds ``code``, as ``fix`` wrote it."""
    try:
        return Path(filename).read_bytes() == code
    except OSError:
        return False


def _write(rewrites: dict[str, tuple[bytes, Rewrite]], plan: Plan) -> None:
    """Write each rewritten file; move the hand edits to their lines in the new files."""
    for filename, (source, result) in rewrites.items():
        Path(filename).write_bytes(result.code)
        moved = _line_map(source.decode(result.encoding), result.code.decode(result.encoding))
        plan.hand = [
            dataclasses.replace(h, lineno=moved(h.lineno)) if h.filename == filename else h
            for h in plan.hand
        ]


def _report(plan: Plan, results: list[Rewrite], analyses: list[Analysis]) -> None:
    """What the user should know besides the diff: state that joins ``state_dict()``, the hand
    edits, what forward makes or takes that fix does not rewrite."""
    for edit in (edit for result in results for edit in result.made):
        if isinstance(edit, WrapModules):
            name = f"{edit.cls.short}.{edit.attribute}"
            print(FIX_GAINS_STATE.format(name=name, container=edit.container), file=sys.stderr)
    _report_hand(plan)
    for analysis in analyses:
        count = analysis.left_by_forward
        if count:
            tensors = "tensor" if count == 1 else "tensors"
            note = FIX_FORWARD_STRAYS.format(target=analysis.target, count=count, tensors=tensors)
            print(note, file=sys.stderr)


def _reaudit(analyses: list[Analysis], low: str) -> tuple[int, bool]:
    """Audit every target again, in one fresh process (``reaudit``), as ``autoreg audit`` would
    (its forward too, in the same precisions, if it could be audited the first time; only in the
    model's own dtype if only the pass in low precision stopped); print each report. The status
    (0 when every target is clean, 1 if not), and whether every target could be built from the
    written files."""
    forward = ["--forward", *(["--low-precision", low] if low != "bfloat16" else [])]
    own = ["--forward", "--low-precision", "none"]
    targets = [
        (a.target, forward if a.forward_audited else own if a.default_audited else [])
        for a in analyses
    ]
    command = [sys.executable, "-m", "autoreg._fix.reaudit", json.dumps(targets)]
    for target, options in targets:
        shown = " ".join(["python -m autoreg audit", target, *options])
        print(FIX_REAUDIT.format(command=shown), file=sys.stderr)
    sys.stderr.flush()
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    try:
        results = json.loads(result.stdout.splitlines()[-1])
    except (IndexError, ValueError):
        output = (result.stdout + result.stderr).rstrip()
        names = ", ".join(target for target, _ in targets)
        print(
            FIX_REAUDIT_FAILED.format(target=names, code=result.returncode, output=output),
            file=sys.stderr,
        )
        return EXIT_FINDINGS, False
    status, built = EXIT_CLEAN, True
    for found in results:
        target, code = found["target"], found["status"]
        if code not in (EXIT_CLEAN, EXIT_FINDINGS):
            print(
                FIX_REAUDIT_FAILED.format(target=target, code=code, output=found["error"]),
                file=sys.stderr,
            )
            code, built = EXIT_FINDINGS, False
        else:
            if found["report"]:
                emit(found["report"].removesuffix("\n"))
            message = FIX_CLEAN if code == EXIT_CLEAN else FIX_NOT_CLEAN
            print(message.format(target=target), file=sys.stderr)
        status = max(status, code)
    return status, built


def _report_hand(plan: Plan) -> None:
    """The hand edits, one entry per file, reason and edit: the lines and names that share them
    joined (soft actor-critic's five tensors of one own to() are one entry, not five)."""
    groups: dict[tuple[str, str, str], tuple[list[int], list[str]]] = {}
    for item in plan.hand:
        lines, names = groups.setdefault((item.filename, item.reason, item.edit), ([], []))
        if item.lineno and item.lineno not in lines:
            lines.append(item.lineno)
        if item.name and item.name not in names:
            names.append(item.name)
    if not groups:
        return
    print(FIX_HAND_HEADER.format(count=len(groups)), file=sys.stderr)
    entries = sorted(groups.items(), key=lambda entry: (entry[0][0], min(entry[1][0], default=0)))
    for (filename, reason, edit), (lines, names) in entries:
        where = _short(filename)
        if lines:
            where += ":" + ", ".join(map(str, sorted(lines)))
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
    standard library, torch and autoreg (``NOT_OWN_DIRS``)."""
    return sorted(NOT_OWN_DIRS)


def _short(filename: str) -> str:
    """``filename`` relative to the working directory when it lies under it."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
