"""The distribution as a user gets it: build the sdist and, from it, the wheel; check that the
sdist is the whole source tree (pytest collects from the unpacked sdist); install the wheel into a
fresh venv; import it there and run both command lines.

Offline and fast: the build runs without isolation (the backend is a test dependency) and the
fresh venv sees the running environment's packages (torch) through a .pth file, so the wheel is
installed with --no-deps --no-index. The commands run outside the checkout and without
PYTHONPATH, so that ``autoreg`` can only come from the installed wheel (or the unpacked sdist).
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from .sources import copy_sources, source_files

LEAKY_MODEL = """\
import torch
from torch import nn


class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.ones(2, 2)
"""

pytestmark = pytest.mark.slow


# What the sdist holds besides the sources: metadata setuptools writes.
GENERATED = re.compile(r"PKG-INFO|setup\.cfg|torch_autoreg\.egg-info/.*")


def _run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd`` without PYTHONPATH (with ``PYTHONPATH=.`` a fresh venv would
    import the checkout instead of what was installed)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from a copy of the sources (the build writes into it)."""
    source = tmp_path_factory.mktemp("source") / "torch-autoreg"
    copy_sources(source)
    out = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source, cwd=out)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its bin directory."""
    env = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=env)
    # torch and its dependencies, from the environment that runs the tests.
    outer = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(site.stdout.strip()) / "outer.pth").write_text("\n".join(sorted(outer)) + "\n")
    (wheel,) = dist.glob("*.whl")
    # --isolated: no PIP_* variable or user configuration (a constraints file, an index) applies.
    install = ["--isolated", "install", "--no-deps", "--no-index", wheel]
    pip = _run(sys.executable, "-m", "pip", "--python", python, *install, cwd=env)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return env / "bin"


def _sdist_names(dist: Path) -> set[str]:
    (sdist,) = dist.glob("torch_autoreg-*.tar.gz")
    with tarfile.open(sdist) as archive:
        return {
            m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile() and "/" in m.name
        }


def test_the_sdist_is_the_whole_source_tree(dist: Path) -> None:
    names = _sdist_names(dist)
    assert {
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "mkdocs.yml",
        "docs/index.md",
        "autoreg/__init__.py",
        "autoreg/py.typed",
        "tests/conftest.py",
        "tests/integrations/_support.py",
        "examples/net.py",
        "benchmarks/__main__.py",
    } <= names
    files = source_files()
    if files is None:
        pytest.skip("not a git checkout: no list of sources to compare the sdist with")
    assert sorted(set(files) - names) == [], "sources missing from the sdist (see MANIFEST.in)"
    extra = sorted(name for name in names - set(files) if not GENERATED.fullmatch(name))
    assert extra == [], "files in the sdist that are not sources"


def test_pytest_collects_the_suite_from_the_unpacked_sdist(dist: Path, tmp_path: Path) -> None:
    (sdist,) = dist.glob("torch_autoreg-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (unpacked,) = tmp_path.iterdir()
    where = _run(sys.executable, "-c", "import autoreg; print(autoreg.__file__)", cwd=unpacked)
    collected = _run(sys.executable, "-m", "pytest", "--collect-only", "-q", cwd=unpacked)
    assert Path(where.stdout.strip()).is_relative_to(unpacked), where.stdout + where.stderr
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr
    count = re.search(r"^(\d+) tests collected", collected.stdout, flags=re.MULTILINE)
    assert count is not None, collected.stdout[-3000:]
    assert int(count.group(1)) > 500


def test_the_wheel_holds_the_package_its_metadata_and_the_console_script(dist: Path) -> None:
    (wheel,) = dist.glob("torch_autoreg-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(info).decode())
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert {"autoreg/__init__.py", "autoreg/__main__.py", "autoreg/py.typed"} <= names
    assert not [name for name in names if name.startswith(("tests/", "benchmarks/", "examples/"))]
    assert metadata["Name"] == "torch-autoreg"
    assert metadata["Requires-Python"] == ">=3.11"
    assert "torch>=2.5" in metadata.get_all("Requires-Dist")
    assert "autoreg = autoreg._cli:main" in entry_points


def test_the_installed_wheel_imports_from_the_venv(installed: Path, tmp_path: Path) -> None:
    where = _run(
        installed / "python", "-c", "import autoreg; print(autoreg.__file__)", cwd=tmp_path
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["autoreg"], id="console-script"),
        pytest.param(["python", "-m", "autoreg"], id="module"),
    ],
)
def test_both_command_lines_audit_a_model(
    installed: Path, tmp_path: Path, command: list[str]
) -> None:
    program, *arguments = command
    (tmp_path / "leaky_model.py").write_text(LEAKY_MODEL)

    usage = _run(installed / program, *arguments, "--help", cwd=tmp_path)
    audit = _run(installed / program, *arguments, "audit", "leaky_model:Leaky", cwd=tmp_path)

    assert usage.returncode == 0, usage.stderr
    assert "audit" in usage.stdout
    assert audit.returncode == 1, audit.stdout + audit.stderr  # 1: something would be left behind
    assert "mask" in audit.stdout
