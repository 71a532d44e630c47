"""The README's test command, ``pytest``: the slow tests skip unless ``AUTOREG_TEST_SLOW=1``, which
every nox session sets (so CI, ``.ci/run``, runs the whole suite with the same command), or a ``-m``
expression that names them. The selection is tests/conftest.py's; these tests run it in-process on
a test file of their own (``pytester``)."""

from __future__ import annotations

import re

import pytest

from .pages import ROOT, blocks

CONFTEST = (ROOT / "tests" / "conftest.py").read_text()
NOXFILE = (ROOT / "noxfile.py").read_text()
TESTS = """
import pytest

@pytest.mark.slow
def test_slow():
    pass

def test_fast():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("AUTOREG_TEST_SLOW", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n    requires_torch: torch\n")
    pytester.makepyfile(test_pair=TESTS)
    return pytester


def test_the_slow_tests_skip_by_default_and_say_how_to_run_them(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.re_match_lines(
        [
            r"slow tests: skipped \(AUTOREG_TEST_SLOW=1 runs them, as CI does\)",
            r"SKIPPED \[1\] .*: slow: AUTOREG_TEST_SLOW=1 runs it \(CI does\)",
        ]
    )


def test_autoreg_test_slow_runs_them(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOREG_TEST_SLOW", "1")
    result = suite.runpytest_inprocess()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["slow tests: run (AUTOREG_TEST_SLOW=1)"])


@pytest.mark.parametrize(
    ("expression", "passed", "deselected"),
    [
        pytest.param("slow", 1, 1, id="only-slow"),
        pytest.param("not slow", 1, 1, id="not-slow"),
    ],
)
def test_a_marker_expression_that_names_slow_decides(
    suite: pytest.Pytester, expression: str, passed: int, deselected: int
) -> None:
    result = suite.runpytest_inprocess("-m", expression)
    result.assert_outcomes(passed=passed, deselected=deselected)


def test_the_readme_command_is_what_every_nox_session_runs_with_the_slow_tests() -> None:
    (install,) = [b.body for b in blocks(ROOT / "README.md", "sh") if "pytest" in b.body]
    assert re.search(r"&& pytest +#", install), install  # the command: plain `pytest`
    runs = re.findall(r'session\.run\("pytest", \*session\.posargs, env=(\w+)\)', NOXFILE)
    assert len(runs) == 2, "the tests session and the matrix sessions run pytest"
    assert NOXFILE.count('session.run("pytest"') == len(runs)
    assert re.search(r'^SUITE = \{"AUTOREG_TEST_SLOW": "1"\}$', NOXFILE, flags=re.MULTILINE)
    assert "env = {**SUITE, " in NOXFILE  # the tests session's env, SUITE's and its own
    assert set(runs) == {"env", "SUITE"}
