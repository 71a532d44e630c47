"""Importing autoreg changes nothing for modules that don't use it (README, first screen)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# Prints a fingerprint of everything autoreg could have patched: nn.Module's methods and the global
# hook registries. Run before and after the import under test, in a fresh interpreter.
FINGERPRINT = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch.nn.modules import module as m

    def fingerprint():
        methods = {
            name: id(vars(torch.nn.Module).get(name))
            for name in ("__setattr__", "__getattr__", "__delattr__", "_apply", "register_buffer",
                         "__init__", "__init_subclass__", "__getstate__", "__setstate__", "to")
        }
        registries = {
            name: len(getattr(m, name))
            for name in dir(m)
            if name.startswith("_global_") and isinstance(getattr(m, name), dict)
        }
        plain = torch.nn.Module()
        plain.x = torch.zeros(1)
        return {"methods": methods, "registries": registries,
                "plain_attribute_stays_plain": "x" in vars(plain) and not plain._buffers,
                "setattr_owner": type(plain).__setattr__.__qualname__}

    before = fingerprint()
    SETUP
    after = fingerprint()
    print(json.dumps({"before": before, "after": after}))
    """
)


def run(setup: str) -> dict[str, dict[str, object]]:
    code = FINGERPRINT.replace("SETUP", setup)
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    result: dict[str, dict[str, object]] = json.loads(output)
    return result


@pytest.mark.slow
def test_importing_autoreg_patches_nothing() -> None:
    every_submodule = (
        "import autoreg, importlib, pkgutil; "
        "[importlib.import_module(f'autoreg.{info.name}') "
        "for info in pkgutil.iter_modules(autoreg.__path__)]"
    )
    result = run(every_submodule)
    assert result["before"] == result["after"]
    assert result["after"]["registries"], "the fingerprint must see the hook registries"
    assert result["after"]["plain_attribute_stays_plain"] is True


@pytest.mark.slow
def test_the_fingerprint_detects_a_patch() -> None:
    """The companion: the check above can fail."""
    patch = (
        "import autoreg; torch.nn.Module._apply = lambda self, fn, recurse=True: self; "
        "m.register_module_buffer_registration_hook(lambda *a: None)"
    )
    result = run(patch)
    assert result["before"]["methods"] != result["after"]["methods"]
    assert result["before"]["registries"] != result["after"]["registries"]
