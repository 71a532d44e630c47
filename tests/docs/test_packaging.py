"""The distribution as a user gets it: build the sdist and, from it, the wheel; check that the
sdist is the whole source tree (pytest collects from the unpacked sdist); check both with
``twine check --strict``, as the package index would see them; install the wheel into a fresh venv;
import it there and run both command lines. The metadata states what is tested: the Python
classifiers are the Pythons the nox sessions run, and each classifier is one the index knows.

Offline and fast: the build runs without isolation (the backend is a test dependency) and the
fresh venv sees the running environment's packages (torch) through a .pth file, so the wheel is
installed with --no-deps --no-index. The commands run outside the checkout and without
PYTHONPATH, so that ``autoreg`` can only come from the installed wheel (or the unpacked sdist).
"""

from __future__ import annotations

import ast
import email.parser
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
import trove_classifiers

import autoreg

from .pages import ROOT
from .sources import copy_sources, source_files

LEAKY_MODEL = """\
import torch
from torch import nn


class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.ones(2, 2)
"""

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert metadata["Version"] == autoreg.__version__
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata["License-Expression"] == "MIT"
    assert "torch>=2.5" in metadata.get_all("Requires-Dist")
    assert set(metadata.get_all("Classifier")) == set(PROJECT["classifiers"])
    assert "autoreg = autoreg._cli:main" in entry_points


def _twine_check(*files: Path) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "twine", "check", "--strict", *files, cwd=files[0].parent)


@pytest.mark.slow
def test_twine_check_passes_on_the_sdist_and_the_wheel(dist: Path) -> None:
    files = sorted(dist.glob("torch_autoreg-*"))
    assert len(files) == 2
    checked = _twine_check(*files)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    assert "Markdown renderers are not available" not in checked.stderr  # it rendered the README


@pytest.mark.slow
def test_twine_check_fails_on_a_wheel_whose_description_type_is_gone(
    dist: Path, tmp_path: Path
) -> None:
    """The companion: the check above can fail."""
    (wheel,) = dist.glob("*.whl")
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = re.sub(rb"^Description-Content-Type: .*\n", b"", data, flags=re.MULTILINE)
            target.writestr(item, data)
    checked = _twine_check(broken)
    assert checked.returncode != 0
    assert "long_description_content_type" in checked.stdout + checked.stderr


def _tested_pythons() -> set[str]:
    """The Pythons the nox sessions run the suite on: PYTHON and the keys of PYTHONS."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    found = {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in ("PYTHON", "PYTHONS")
    }
    return {found["PYTHON"], *found["PYTHONS"]}


def test_the_python_classifiers_are_the_pythons_the_suite_runs_on() -> None:
    prefix = "Programming Language :: Python :: "
    listed = {c.removeprefix(prefix) for c in PROJECT["classifiers"] if re.fullmatch(
        re.escape(prefix) + r"3\.\d+", c)}  # fmt: skip
    tested = _tested_pythons()
    assert listed == tested == {"3.11", "3.12", "3.13"}
    assert PROJECT["requires-python"] == f">={min(tested, key=lambda v: int(v.split('.')[1]))}"
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.11, 3.12 and 3.13" in " ".join(readme.split())


def test_every_classifier_is_one_the_package_index_knows() -> None:
    unknown = [c for c in PROJECT["classifiers"] if c not in trove_classifiers.classifiers]
    assert unknown == []
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # PEP 639: license=


def test_the_version_is_the_packages() -> None:
    assert PROJECT["version"] == autoreg.__version__


@pytest.mark.slow
def test_the_installed_wheel_imports_from_the_venv(installed: Path, tmp_path: Path) -> None:
    where = _run(
        installed / "python", "-c", "import autoreg; print(autoreg.__file__)", cwd=tmp_path
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)


@pytest.mark.slow
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
