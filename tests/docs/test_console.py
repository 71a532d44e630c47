"""Every ```console block of the README and the docs runs as written: commands, output, statuses.

Conventions: a line starting with ``$ `` is a command, run with bash from the repository root,
each in a shell of its own; the lines after it are its output (stdout and stderr, as a terminal
shows them). In the expected output a line ``...`` stands for any number of lines and ``...``
inside a line for any text. A command must exit with status 0 unless the next command is
``echo $?``, which prints its status. Only ```console blocks run: keep commands that must not run
here (installing, running the whole test suite) in ```sh blocks.

These tests are slow (a process per command): ``pytest`` skips them, ``AUTOREG_TEST_SLOW=1`` runs
them. ``AUTOREG_UPDATE_DOCS=1`` rewrites the expected output of each command whose output no
longer matches with the real one (the repository's path shown as ``...``), for a change of the
command line's output format: review the diff, and shorten long output with ``...`` again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .pages import ELLIPSIS, ROOT, Block, blocks, matches, page_id, pages

SHOW_STATUS = "echo $?"
UPDATE = os.environ.get("AUTOREG_UPDATE_DOCS") == "1"


def parse_console(block: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected output lines), ...]`` for one console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before any command in the block:\n{block}"
            steps[-1][1].append(line)
    return steps


def environment() -> dict[str, str]:
    """The test's environment, without what would change the commands' behaviour or output."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AUTOREG_MODE", "PYTHONWARNINGS", "PYTHONPATH", "AUTOREG_UPDATE_DOCS")
        and not key.startswith("PYTEST_")
    }
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleaved as on a terminal
    # `python`, `pytest` and `autoreg` are those of the interpreter running the tests.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


CONSOLE_BLOCKS = [block for page in pages() for block in blocks(page, "console")]


def block_id(block: Block) -> str:
    return f"{page_id(block.page)}:{parse_console(block.body)[0][0]}"


def update(block: Block, position: int, output: str) -> None:
    """Replace the expected output of the ``position``-th command of ``block`` with ``output``."""
    steps = parse_console(block.body)
    command, _ = steps[position]
    shown = [line.rstrip().replace(str(ROOT), ELLIPSIS) for line in output.splitlines()]
    steps[position] = (command, shown)
    body = "".join(f"$ {cmd}\n" + "".join(f"{line}\n" for line in out) for cmd, out in steps)
    text = block.page.read_text()
    assert text.count(block.body) == 1, f"{block.id}: the same block twice; update it by hand"
    block.page.write_text(text.replace(block.body, body))


def test_the_docs_walk_through_a_migration_and_both_audits() -> None:
    commands = [command for block in CONSOLE_BLOCKS for command, _ in parse_console(block.body)]
    assert "AUTOREG_MODE=warn python -m examples.autoreg_model" in commands
    assert "python -m autoreg audit examples.legacy_model:build" in commands
    assert "python -m autoreg audit examples.migrated_model:build" in commands
    assert any(command.startswith("AUTOREG_MODE=strict pytest") for command in commands)
    assert any(command.endswith("--forward") for command in commands)


# slow: each command is a process that imports torch (1 to 8 s a block on 2 cores).
@pytest.mark.slow
@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=[block_id(block) for block in CONSOLE_BLOCKS])
def test_each_console_block_runs_as_written(block: Block) -> None:
    steps = parse_console(block.body)
    status = 0
    for position, (command, expected) in enumerate(steps):
        if command == SHOW_STATUS:
            assert status != 0, "`echo $?` shows the status of a command that failed"
        result = subprocess.run(
            ["bash", "-c", f"(exit {status}); {command}"],
            cwd=ROOT,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
        shown = position + 1 < len(steps) and steps[position + 1][0] == SHOW_STATUS
        assert result.returncode == 0 or shown, (
            f"$ {command}\nexited with {result.returncode}:\n{result.stdout}"
        )
        if UPDATE and not matches(expected, result.stdout):
            update(block, position, result.stdout)
            pytest.fail(f"{block.id}: updated the output of `{command}`; rerun to check it")
        assert matches(expected, result.stdout), (
            f"$ {command}\nexpected:\n" + "\n".join(expected) + f"\ngot:\n{result.stdout}"
        )
        status = result.returncode


# --- the matcher itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [
        (["a", "b"], "a\nb\n", True),
        (["a", "b"], "a\nc\n", False),
        (["a"], "a\nb\n", False),
        (["a", ELLIPSIS, "d"], "a\nb\nc\nd\n", True),
        (["a", ELLIPSIS, "d"], "a\nd\n", True),
        (["a", ELLIPSIS], "a\n", True),
        (["x = ...;"], "x = 42;\n", True),
        (["x = ...;"], "y = 42;\n", False),
        (["a (b)"], "a (b)   \n", True),
    ],
    ids=[
        "exact",
        "different",
        "extra-line",
        "ellipsis-lines",
        "ellipsis-no-line",
        "trailing-ellipsis",
        "inline",
        "inline-different",
        "trailing-spaces",
    ],
)
def test_the_output_matcher(expected: list[str], actual: str, result: bool) -> None:
    assert matches(expected, actual) is result
