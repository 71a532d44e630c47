"""The test suite on every supported torch, and the documentation: ``nox`` runs lint, the default
session and the docs build; ``nox -t matrix`` runs the whole suite once per torch version.

    nox                     lint, the suite on the CPU torch 2.13.0 with the integrations, docs
    nox -s docs             the documentation site, built with mkdocs --strict into site/
    nox -s torch-2.5.1      the suite on one torch version (a venv of its own, kept between runs)
    nox -t matrix           the suite on every version in MATRIX, one after the other
    nox -R -s torch-2.9.1   rerun without touching the installed packages

Every torch but the default is a CUDA build of 5-7 GB from the registry (it runs on CPU). Venvs are
reused, so only the first run of a session downloads it. The global pip constraints file of some
machines caps torch; each session points PIP_CONSTRAINT at a file of its own that pins its version,
which takes the place of the global one.
"""

from __future__ import annotations

from pathlib import Path

import nox

PYTHON = "3.11"
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
    env = {"AUTOREG_REQUIRE_INTEGRATIONS": "1", "AUTOREG_TEST_INSTALL": "1"}
    session.run("pytest", *session.posargs, env=env)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site: mkdocs --strict, so a broken link or API reference fails.

    mkdocstrings reads autoreg's sources without importing them: no torch in this venv.
    """
    session.install(*nox.project.dependency_groups(nox.project.load_toml("pyproject.toml"), "docs"))
    # NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning.
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


def _matrix_session(torch: str) -> None:
    def run(session: nox.Session) -> None:
        _install(session, torch, "test")
        session.run("pytest", *session.posargs)  # the dev install test runs in `tests` only

    run.__doc__ = f"The suite on torch {torch}, without the integrations extra (those tests skip)."
    nox.session(run, python=PYTHON, name=f"torch-{torch}", tags=["matrix"], default=False)


for _version in MATRIX:
    _matrix_session(_version)
