"""The audits run copies of the model, and the model is left as it was.

``deepcopy`` shares functions, and a class's own ``__deepcopy__`` may share more (its parameters,
or the module itself). The copy the audits convert must reach only copies: a function a module
keeps (a lambda over its own layers, as minGPT's ``Block.mlpf``) runs on the copy's weights and
keeps its own closure state, wherever it is kept; parameters a ``__deepcopy__`` shares are copied;
a module whose copy is itself is not converted, and the audit says why.
"""

from __future__ import annotations

import copy
import functools
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import autoreg


class _Uses(nn.Module):
    """Runs ``self.f`` on its input; each subclass keeps ``f`` (or what calls it) its own way,
    always reaching the module's own ``mlp``."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.f(x)


class _InList(_Uses):
    def __init__(self) -> None:
        super().__init__()
        m = self.mlp
        self.fs = [lambda x: m(x)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fs[0](x)


class _InDict(_Uses):
    def __init__(self) -> None:
        super().__init__()
        self.fs = {"proj": lambda x: self.mlp(x)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fs["proj"](x)


class _InNamespace(_Uses):
    def __init__(self) -> None:
        super().__init__()
        m = self.mlp
        self.ns = types.SimpleNamespace(f=lambda x: m(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ns.f(x)


def _direct(module: _Uses) -> Callable[..., Any]:
    m = module.mlp
    return lambda x: m(x)


def _partial(module: _Uses) -> Callable[..., Any]:
    m = module.mlp
    return functools.partial(lambda x, s: m(x) * s, s=2.0)


def _decorated(module: _Uses) -> Callable[..., Any]:
    m = module.mlp

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any) -> Any:
            return function(*args)

        return wrapper

    return decorate(lambda x: m(x))


def _nested(module: _Uses) -> Callable[..., Any]:
    m = module.mlp

    def inner(x: torch.Tensor) -> torch.Tensor:
        return m(x)

    return lambda x: inner(x) * 2


def _recursive(module: _Uses) -> Callable[..., Any]:
    m = module.mlp

    def f(x: torch.Tensor, k: int = 2) -> torch.Tensor:
        return m(x) if k == 0 else f(x, k - 1)

    return f


def _default(module: _Uses) -> Callable[..., Any]:
    return lambda x, m=module.mlp: m(x)


def _tuple_of_layers(module: _Uses) -> Callable[..., Any]:
    layers = (module.mlp, nn.Linear(4, 4))
    module.out = layers[1]
    return lambda x: layers[1](layers[0](x))


def _kept(make: Callable[[_Uses], Callable[..., Any]]) -> _Uses:
    module = _Uses()
    module.f = make(module)
    return module


SHAPES = {
    "attribute": lambda: _kept(_direct),
    "list": _InList,
    "dict": _InDict,
    "namespace": _InNamespace,
    "partial": lambda: _kept(_partial),
    "decorated": lambda: _kept(_decorated),
    "nested-helper": lambda: _kept(_nested),
    "recursive": lambda: _kept(_recursive),
    "default-argument": lambda: _kept(_default),
    "tuple-of-layers": lambda: _kept(_tuple_of_layers),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_function_the_model_keeps_runs_on_the_copys_weights(shape: str) -> None:
    """Before: only a function kept directly as an attribute reached the copy; in a list, a
    dict, a ``partial``, behind a decorator, ... it ran the original's weights, reported as
    made before forward."""
    model = SHAPES[shape]()
    assert autoreg.audit_forward(model, torch.randn(2, 4)) == []
    assert model.mlp.weight.dtype == torch.float32


class _Stateful(nn.Module):
    """A function that counts its calls and keeps what it computed (a nonlocal counter and a
    list in its closure)."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(4, 4)
        mlp, calls, kept = self.mlp, 0, []

        def step(x: torch.Tensor) -> torch.Tensor:
            nonlocal calls
            calls += 1
            y = mlp(x)
            kept.append(y.detach())
            return y

        self.step = step
        self.calls = lambda: calls
        self.kept = lambda: kept

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.step(x)


def test_what_a_function_of_the_model_keeps_in_its_closure_is_left_as_it_was() -> None:
    """Before: the copy's function wrote the original's counter and list."""
    model = _Stateful()
    model(torch.randn(2, 4))
    assert autoreg.audit_forward(model, torch.randn(2, 4)) == []
    assert model.calls() == len(model.kept()) == 1
    assert model.kept()[0].dtype == torch.float32


class _SharedOnCopy(nn.Embedding):
    """Its copy shares its parameters (a target network that is never soft-updated)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedOnCopy:
        return copy.copy(self)


class _Looked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = _SharedOnCopy(10, 4)
        self.out = nn.Linear(4, 4)

    def forward(self, i: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(i))


def test_parameters_a_deepcopy_shares_are_copied_for_the_audit() -> None:
    """Before: the copy's ``.to(torch.bfloat16)`` converted the shared parameter in place: the
    audit found nothing, and the model's own embedding was bfloat16 after it."""
    model = _Looked()
    weight = model.emb.weight
    assert autoreg.audit_forward(model, torch.tensor([1, 2])) == []
    assert model.emb.weight is weight
    assert weight.dtype == torch.float32


class _Itself(nn.Module):
    """Its copy is itself (a frozen encoder shared between copies)."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.then = lambda x: head(x)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Itself:
        return self


class _HoldsItself(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.shared = _Itself(self.head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared.then(self.shared.enc(x))


def test_a_module_whose_copy_is_itself_is_not_converted_and_the_audit_says_why() -> None:
    """Before: the copy's ``.to(torch.bfloat16)`` converted the model's own encoder, and its
    function was rebound to reach the audit's copy of ``head``."""
    model = _HoldsItself()
    with pytest.raises(
        autoreg.ForwardAuditError, match=r"_Itself's deep copy is the module itself"
    ):
        autoreg.audit_forward(model, torch.randn(2, 4))
    assert model.shared.enc.weight.dtype == torch.float32
    assert model.shared.then.__closure__[0].cell_contents is model.head


class _OwnApply(nn.Module):
    """A class with its own ``_apply`` that holds a plain tensor (the attribute audit converts a
    copy of it to meta, to see whether that ``_apply`` moves it), and a module whose copy shares
    its parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = _SharedOnCopy(10, 4)
        self.table = torch.ones(2)

    def _apply(self, fn: Any, recurse: bool = True) -> _OwnApply:
        return super()._apply(fn, recurse)


def test_the_attribute_audit_leaves_shared_parameters_as_they_were() -> None:
    """Before: the copy's ``.to("meta")`` replaced the parameter in the registry the copy shared
    with the model: the model's embedding was on the meta device after the audit."""
    model = nn.Sequential(_OwnApply())
    [finding] = autoreg.find_unregistered(model)
    assert finding.attribute == "table"
    assert model[0].emb.weight.device.type == "cpu"


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class _KeepsAStaticMethod(nn.Module):
    """Keeps a helper wrapped in ``staticmethod`` as an attribute (a rotary library exposes its
    ``apply_rotary_emb`` so), which ``deepcopy`` refuses; its forward makes a stray."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.rotate = staticmethod(_rotate_half)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2]).float()
        return _rotate_half(self.proj(x)) * positions[:, None]


def test_a_static_method_kept_as_an_attribute_does_not_stop_the_audit() -> None:
    """Before: "audit_forward() cannot deep-copy": the model was not audited, its stray missed."""
    findings = autoreg.audit_forward(_KeepsAStaticMethod(), torch.randn(3, 4))
    assert {f.kind for f in findings} == {"device", "dtype"}


_LOCK = threading.Lock()  # what deepcopy refuses


class _Holder:
    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.lock = threading.Lock()


class _ReachesThroughUncopyable(nn.Module):
    """Functions whose closures reach the module's own layer through a container or an object
    that also holds something ``deepcopy`` refuses (a lock), twice."""

    def __init__(self, holder: str) -> None:
        super().__init__()
        self.mlp = nn.Linear(4, 4)
        if holder == "dict":
            stuff: Any = {"lock": _LOCK, "mod": self.mlp}
            self.f = lambda x: stuff["mod"](x)
            self.g = lambda x: stuff["mod"](x)
        else:
            held = _Holder(self.mlp)
            self.f = lambda x: held.module(x)
            self.g = lambda x: held.module(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.g(self.f(x))


@pytest.mark.parametrize("holder", ["dict", "object"])
def test_a_closure_that_holds_something_uncopyable_beside_a_layer_reaches_the_copys_layer(
    holder: str,
) -> None:
    """Before: the failed copy of the holder left its half-built copy in the memo, which the
    second function then reached ("KeyError: 'mod'" reported as raising "without the audit too");
    and a holder that could not be copied was shared, so the function ran the original's layer
    (false findings)."""
    model = _ReachesThroughUncopyable(holder)
    assert autoreg.audit_forward(model, torch.randn(2, 4)) == []
    assert model.mlp.weight.dtype == torch.float32
