"""The migration guide runs as written: its commands, their output and their exit statuses.

Conventions of the guide's ```console blocks: a line starting with ``$ `` is a command, run with
bash from the repository root, each in a shell of its own; the lines after it are its output
(stdout and stderr, as a terminal shows them). In the expected output a line ``...`` stands for
any number of lines and ``...`` inside a line for any text. A command must exit with status 0
unless the next command is ``echo $?``, which prints its status.

A ```python block whose first line is ``# path/to/file.py`` (a path with a directory) quotes that
file verbatim. Only ```console blocks run: keep commands that must not run here (installing,
running the whole test suite) in ```bash or ```sh blocks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "README.md"  # the guide to run (its "Migrating" section); the only place naming it

ELLIPSIS = "..."
SHOW_STATUS = "echo $?"


def fenced_blocks(language: str) -> list[str]:
    text = GUIDE.read_text()
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


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


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.split(ELLIPSIS)) + r"\n")
    return re.compile("".join(parts))


def matches(expected: list[str], actual: str) -> bool:
    actual = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return output_pattern(expected).fullmatch(actual) is not None


def environment() -> dict[str, str]:
    """The test's environment, without what would change the commands' behaviour or output."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AUTOREG_MODE", "PYTHONWARNINGS", "PYTHONPATH")
        and not key.startswith("PYTEST_")
    }
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleaved as on a terminal
    # `python` and `pytest` are those of the interpreter running the tests, activated or not.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


CONSOLE_BLOCKS = [parse_console(block) for block in fenced_blocks("console")]
QUOTE_HEADER = re.compile(r"# ((?:[\w.-]+/)+[\w.-]+\.py)\n")  # e.g. "# examples/model.py"
QUOTES = [block for block in fenced_blocks("python") if QUOTE_HEADER.match(block)]


def test_the_guide_has_the_four_steps() -> None:
    commands = [command for block in CONSOLE_BLOCKS for command, _ in block]
    assert "AUTOREG_MODE=warn python -m examples.autoreg_model" in commands
    assert "python -m autoreg audit examples.legacy_model:build" in commands
    assert "python -m autoreg audit examples.migrated_model:build" in commands
    assert any(command.startswith("AUTOREG_MODE=strict pytest") for command in commands)


@pytest.mark.parametrize("steps", CONSOLE_BLOCKS, ids=[block[0][0] for block in CONSOLE_BLOCKS])
def test_each_console_block_runs_as_written(steps: list[tuple[str, list[str]]]) -> None:
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
        assert matches(expected, result.stdout), (
            f"$ {command}\nexpected:\n" + "\n".join(expected) + f"\ngot:\n{result.stdout}"
        )
        status = result.returncode


def quote_id(quote: str) -> str:
    header, *lines = quote.splitlines()
    names = [line.split()[1].split("(")[0] for line in lines if line.startswith("class ")]
    return f"{header[2:]}:{names[0] if names else 'excerpt'}"


@pytest.mark.parametrize("quote", QUOTES, ids=[quote_id(quote) for quote in QUOTES])
def test_each_quoted_file_excerpt_is_in_the_file(quote: str) -> None:
    header, _, excerpt = quote.partition("\n")
    source = (ROOT / header[2:]).read_text()
    assert excerpt in source


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
