"""The test suite on every supported torch: ``nox`` runs lint and the default session,
``nox -t matrix`` runs the whole suite once per torch version.

    nox                     lint, then the suite on the CPU torch 2.13.0 with the integrations
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
DEFAULT_TORCH = "2.13.0"  # its CPU wheel is the one the README's Development section installs
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

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True


def _install(session: nox.Session, torch: str, extras: str) -> None:
    """Install torch ``torch`` first, then the project with ``extras``, never another torch."""
    constraints = Path(session.create_tmp()).resolve() / "constraints.txt"
    constraints.write_text(f"torch=={torch}\n")
    pinned = {"PIP_CONSTRAINT": str(constraints)}  # for the installs only, not for the tests
    session.install(f"torch=={torch}", env=pinned)
    session.install("-e", f".[{extras}]", env=pinned)
    session.run("python", "-c", "import torch; print('torch', torch.__version__)", silent=False)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict (mypy reads torch's types: the default torch is installed)."""
    _install(session, DEFAULT_TORCH, "test")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The README's test command on the default torch, tests/integrations included (required)."""
    _install(session, DEFAULT_TORCH, "test,integrations")
    # timm pulls torchvision, whose only wheel for torch 2.13 is a CUDA build: on the CPU torch its
    # operators fail to load and break the imports of lightning, torchmetrics and transformers.
    # Without it, only timm cannot be imported (its tests skip, with that reason).
    session.run_install("python", "-m", "pip", "uninstall", "--yes", "torchvision")
    session.run("pytest", *session.posargs, env={"AUTOREG_REQUIRE_INTEGRATIONS": "1"})


def _matrix_session(torch: str) -> None:
    def run(session: nox.Session) -> None:
        _install(session, torch, "test")
        session.run("pytest", *session.posargs)

    run.__doc__ = f"The suite on torch {torch}, without the integrations extra (those tests skip)."
    nox.session(run, python=PYTHON, name=f"torch-{torch}", tags=["matrix"], default=False)


for _version in MATRIX:
    _matrix_session(_version)
