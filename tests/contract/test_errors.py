"""The library's exceptions: one family, importable from ``autoreg``, named ``autoreg.X``."""

from __future__ import annotations

import pickle

import pytest

import autoreg

EXCEPTIONS = [
    name
    for name in autoreg.__all__
    if isinstance(getattr(autoreg, name), type)
    and issubclass(getattr(autoreg, name), (Exception, Warning))
]


def test_every_exception_is_exported() -> None:
    assert set(EXCEPTIONS) == {
        "AutoRegisterError",
        "AutoRegisterWarning",
        "BufferKeyError",
        "BufferTypeError",
        "ClassDefinitionError",
        "ConfigurationError",
        "ExportError",
        "ForwardAuditError",
        "NotAModuleError",
        "UnregisteredTensorError",
    }


@pytest.mark.parametrize("name", EXCEPTIONS)
def test_tracebacks_read_autoreg_dot_name(name: str) -> None:
    cls = getattr(autoreg, name)
    assert f"{cls.__module__}.{cls.__qualname__}" == f"autoreg.{name}"
    if name != "AutoRegisterWarning":
        assert issubclass(cls, autoreg.AutoRegisterError)


def test_an_error_pickles_by_its_public_name() -> None:
    error = autoreg.UnregisteredTensorError("cannot assign ...")
    assert pickle.loads(pickle.dumps(error)).args == error.args
    assert b"autoreg\nUnregisteredTensorError" in pickle.dumps(error, protocol=0)
