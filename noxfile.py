"""The test suite on every supported torch and Python, and the documentation: ``nox`` runs lint,
the default session and the docs build; ``nox -t matrix`` runs the whole suite once per torch
version, ``nox -t pythons`` once per newer Python.

    nox                           lint, the suite (CPU torch 2.13.0, the integrations), docs
    nox -s docs                   the documentation site, built with mkdocs --strict into site/
    nox -s torch-2.5.1            the suite on one torch version (a venv of its own, kept)
    nox -t matrix                 the suite on every version in MATRIX (Python 3.11), in turn
    nox -s torch-2.5.1-py3.12     the suite on a newer Python (PYTHONS: which torch on which)
    nox -R -s torch-2.9.1         rerun without touching the installed packages

Every session runs the whole suite, the slow tests included (AUTOREG_TEST_SLOW=1; a bare ``pytest``
skips them). Every torch but the default is a CUDA build of 3-7 GB from the registry (it runs on
CPU). Venvs are reused, so only the first run of a session downloads it. The global pip
constraints file of some machines caps torch; each session points PIP_CONSTRAINT at a file of its
own that pins its version, which takes the place of the global one.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nox

PYTHON = "3.11"
# The newer Pythons, each with the torch it runs the suite on: the oldest torch on 3.12 and the
# newest on 3.13, so that CI covers three Pythons and both ends of the torch range in as many
# sessions as before (a torch with wheels for it: 2.5 has 3.12 wheels; on 3.13 torch.compile needs
# torch >= 2.6). 3.14 is not run (no interpreter on the machines the project runs on).
PYTHONS = {"3.12": "2.5.1", "3.13": "2.15.0"}
DEFAULT_TORCH = "2.13.0"  # its CPU wheel is the one CONTRIBUTING.md's development install uses
MATRIX = [
    "2.5.1",  # the oldest supported: nn.Buffer appears in 2.5
    "2.6.0",
    "2.7.1",
    "2.8.0",
    "2.9.1",
    "2.10.0",
    "2.11.0",
    "2.12.1",
    "2.13.0",
    "2.14.1",
    "2.15.0",
]
OLDEST, NEWEST = MATRIX[0], MATRIX[-1]

nox.options.sessions = ["lint", "tests", "docs"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"  # a missing interpreter is an error, not a download

# Every pytest run of a session: the whole suite, the slow tests too (tests/conftest.py).
SUITE = {"AUTOREG_TEST_SLOW": "1"}


# Run after every install: the session's torch is the one it pinned, and nothing pulled in
# torchvision (only the `timm` extra needs it; no session installs that extra).
CHECK_TORCH = """
import importlib.util, sys, torch
print("torch", torch.__version__)
if torch.__version__.split("+")[0] != sys.argv[1]:
    sys.exit(f"expected torch {sys.argv[1]}, the install left {torch.__version__}")
if importlib.util.find_spec("torchvision") is not None:
    sys.exit("torchvision was installed: an extra that needs it crept into this session")
"""


def _interpreter(version: str) -> str:
    """The Python ``version`` ("3.12"): pyenv's build of it where pyenv has one (its shims hide
    every version but the global ones), else the version for nox to find."""
    pattern = re.compile(rf"{re.escape(version)}\.(\d+)")
    builds = {
        int(match.group(1)): path / "bin" / f"python{version}"
        for path in (Path.home() / ".pyenv" / "versions").glob(f"{version}.*")
        if (match := pattern.fullmatch(path.name)) and (path / "bin" / f"python{version}").exists()
    }
    return str(builds[max(builds)]) if builds else version


def _install(session: nox.Session, torch: str, extras: str) -> None:
    """Install torch ``torch`` first, then the project with ``extras``, never another torch."""
    constraints = Path(session.create_tmp()).resolve() / "constraints.txt"
    constraints.write_text(f"torch=={torch}\n")
    pinned = {"PIP_CONSTRAINT": str(constraints)}  # for the installs only, not for the tests
    session.install(f"torch=={torch}", env=pinned)
    session.install("-e", f".[{extras}]", env=pinned)
    session.run("python", "-c", CHECK_TORCH, torch, silent=False)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict (mypy reads torch's types: the default torch is installed)."""
    _install(session, DEFAULT_TORCH, "test")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The suite on the default torch: tests/integrations required, the dev install tested.

    The `timm` extra is not installed: timm needs torchvision, and the registry's torchvision for
    torch 2.13 is a CUDA build whose operators fail to load next to the CPU torch (breaking the
    imports of lightning and torchmetrics too). tests/integrations/test_timm.py skips.
    """
    _install(session, DEFAULT_TORCH, "test,integrations")
    env = {**SUITE, "AUTOREG_REQUIRE_INTEGRATIONS": "1", "AUTOREG_TEST_INSTALL": "1"}
    session.run("pytest", *session.posargs, env=env)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site: mkdocs --strict, so a broken link or API reference fails.

    It installs the `docs` extra's packages alone: mkdocstrings reads autoreg's sources without
    importing them, so no torch in this venv.
    """
    with Path("pyproject.toml").open("rb") as file:
        session.install(*tomllib.load(file)["project"]["optional-dependencies"]["docs"])
    # NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning.
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


def _suite_session(torch: str, python: str, name: str, tag: str) -> None:
    def run(session: nox.Session) -> None:
        _install(session, torch, "test")
        session.run("pytest", *session.posargs, env=SUITE)  # the dev install test: `tests` only

    run.__doc__ = (
        f"The suite on torch {torch} and Python {python}, without the integrations extra (those "
        "tests skip)."
    )
    nox.session(run, python=_interpreter(python), name=name, tags=[tag], default=False)


for _version in MATRIX:
    _suite_session(_version, PYTHON, f"torch-{_version}", "matrix")
for _python, _version in PYTHONS.items():
    _suite_session(_version, _python, f"torch-{_version}-py{_python}", "pythons")
