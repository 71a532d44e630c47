"""PyTorch's own module catalogue: the mixin before every module class torch tests itself with.

``torch.testing._internal.common_modules.module_db`` lists each ``torch.nn`` module class with the
constructor and forward inputs PyTorch's own test suite uses. For each class and each of its first
three inputs, ``class Auto(autoreg.AutoRegisterMixin, cls)`` (default and strict mode) must build
the same parameters, buffers and ``state_dict``, compute the same output (or raise the same
error) called directly, through ``torch.func.functional_call`` with its own parameters and
buffers, and as a deep copy, and keep the same registries and plain tensor attributes through
``.double()``.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
import torch
from torch import nn
from torch.testing._internal.common_modules import module_db

import autoreg

CASES = [pytest.param(info, id=info.formatted_name) for info in module_db]


def registries(module: nn.Module) -> tuple[list[str], list[str], list[str], list[str]]:
    return (
        sorted(dict(module.named_parameters())),
        sorted(dict(module.named_buffers())),
        sorted(module.state_dict()),
        sorted(str(t.dtype) for t in (*module.parameters(), *module.buffers())),
    )


def module_inputs(info: Any) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own deprecation warnings while it builds inputs
        return list(
            info.module_inputs_func(
                info, device="cpu", dtype=torch.float32, requires_grad=False, training=True
            )
        )[:3]


def plain_tensors(module: nn.Module) -> list[tuple[str, str]]:
    """The tensors the module holds as plain attributes, and their dtypes."""
    return sorted(
        (name, str(value.dtype))
        for name, value in vars(module).items()
        if type(value) is torch.Tensor
    )


def functional(module: nn.Module) -> Any:
    """``module``, called through ``torch.func.functional_call`` with its own state."""
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return lambda *args, **kwargs: torch.func.functional_call(module, state, args, kwargs)


def call(module: Any, forward_input: Any) -> Any:
    """The output, or the error: a few catalogue inputs fail for the original class too."""
    torch.manual_seed(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. RNNs warning about non-contiguous weights
            args, kwargs = copy.deepcopy(forward_input.args), copy.deepcopy(forward_input.kwargs)
            return module(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - compared with the original's below
        return f"{type(error).__name__}: {error}"


def test_the_catalogue_is_there() -> None:
    assert len(module_db) > 100


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("info", CASES)
def test_mixed_in_class_matches_the_original(info: Any, strict: bool) -> None:
    cls = info.module_cls
    mixed = type(f"Auto{cls.__name__}", (autoreg.AutoRegisterMixin, cls), {}, strict=strict)
    inputs = module_inputs(info)
    assert inputs, f"no inputs for {cls.__name__}"
    for module_input in inputs:
        args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's constructor warnings, the same for both
            torch.manual_seed(0)
            original = cls(*args, **kwargs)
            torch.manual_seed(0)
            ours = mixed(*args, **kwargs)
        assert registries(ours) == registries(original)
        if module_input.forward_input is not None:
            for view in (lambda module: module, functional, copy.deepcopy):
                output = call(view(ours), module_input.forward_input)
                expected = call(view(original), module_input.forward_input)
                if isinstance(expected, str):
                    assert output == expected
                else:
                    torch.testing.assert_close(output, expected, equal_nan=True)
        assert registries(ours.double()) == registries(original.double())
        assert plain_tensors(ours) == plain_tensors(original)
