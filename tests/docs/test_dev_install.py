"""CONTRIBUTING.md's development install keeps the torch you installed first.

The block marked ``<!-- dev-install -->`` runs as written, line by line in one bash, from a copy of
the sources: it makes a fresh venv, installs torch 2.13.0, pins it in a constraints file, then
installs the project with the ``test`` and ``integrations`` extras. Afterwards torch must still be
2.13.0, torchvision must be absent, and the frameworks the suite needs and the documentation tools
(the ``docs`` extra, part of ``test``) must import: the venv's own pip installs them.

Before timm had its own extra, this install replaced torch 2.13.0 with the registry's newest
torchvision's torch (a CUDA build and 15 ``nvidia-*`` packages) unless a constraints file held it.

It installs from the package registry (minutes, network): it runs only where
``AUTOREG_TEST_INSTALL=1`` (the ``tests`` nox session, which CI runs), and fails there when the
registry cannot be reached.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from .pages import ROOT, blocks
from .sources import copy_sources

CONTRIBUTING = ROOT / "CONTRIBUTING.md"
FRAMEWORKS = (
    "lightning",
    "transformers",
    "accelerate",
    "torchmetrics",
    "onnx",
    "onnxruntime",
    "pyro",
)
# The docs extra, which the test extra includes: installed by the pip a fresh venv has (23.2 with
# Python 3.11), which cannot install dependency groups (pip >= 25.1).
DOCS_TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
CHECK = f"""
import importlib, importlib.metadata, importlib.util, torch
for name in {FRAMEWORKS + DOCS_TOOLS!r}:
    importlib.import_module(name)
print(torch.__version__, importlib.util.find_spec("torchvision") is not None,
      importlib.metadata.version("pip"))
"""


def dev_install() -> str:
    (block,) = [
        block for block in blocks(CONTRIBUTING, "sh") if block.comment == "<!-- dev-install -->"
    ]
    return block.body


def test_the_documented_install_pins_torch_first() -> None:
    install = dev_install()
    assert re.search(r"^pip install torch==2\.13\.0\b", install, flags=re.MULTILINE)
    assert 'PIP_CONSTRAINT=.venv/torch-constraint.txt pip install -e ".[test,integrations]"' in (
        install
    )


@pytest.mark.slow
@pytest.mark.install
@pytest.mark.skipif(
    os.environ.get("AUTOREG_TEST_INSTALL") != "1",
    reason="creates a venv and installs from the registry: set AUTOREG_TEST_INSTALL=1",
)
def test_the_development_install_keeps_torch_and_brings_no_torchvision(tmp_path: Path) -> None:
    source = tmp_path / "autoreg"
    copy_sources(source)
    # The shell a contributor has: no venv active, no PYTHONPATH, no constraints of their own
    # (pip's configuration, such as a local wheel directory, still applies).
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT")
    }
    outer_venv = os.environ.get("VIRTUAL_ENV")
    if outer_venv:
        path = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in path if not p.startswith(outer_venv))

    installed = subprocess.run(
        ["bash", "-e", "-c", dev_install()],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    checked = subprocess.run(
        [str(source / ".venv" / "bin" / "python"), "-c", CHECK],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr[-3000:]
    version, torchvision, _pip = checked.stdout.split()  # _pip: 23.2.1, the venv's own
    assert version.split("+")[0] == "2.13.0", f"the install replaced torch 2.13.0 by {version}"
    assert torchvision == "False", "the install brought torchvision"
