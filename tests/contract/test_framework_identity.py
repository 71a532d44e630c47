"""Row 4 by identity: whose code an assignment is, never by a name two pieces of code can share.

The model's code is the functions of the instance's own classes (the class, its autoreg bases and
the plain mixins listed before ``AutoRegisterMixin``); a framework's is the functions of every
other base (nn.Module or not) and any function of the packages those bases' code lives in. A
function is found through what wraps it (``functools.wraps`` decorators, ``partial``, static and
class methods, properties, ``partialmethod``), and its nested functions, lambdas and
comprehensions are its own. Each test below gave the wrong answer when code was matched by
``__module__`` + ``__qualname__`` (checked on the code before this file).
"""

from __future__ import annotations

import copy
import functools
import gc
import pickle
import sys
import textwrap
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role

# --- item 1: same-named classes ---------------------------------------------------------------


class Net(nn.Module):
    """A plain model, migrated in place below by ``class Net(autoreg.AutoRegisterMixin, Net)``."""

    def __init__(self) -> None:
        super().__init__()
        self.base_table = torch.ones(2)  # the plain base's own: nn.Module's rules (row 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.base_state = x.detach()  # the plain base's runtime state: a plain attribute
        return x


PlainNet = Net


class Net(autoreg.AutoRegisterMixin, Net):  # type: ignore[no-redef]
    def __init__(self) -> None:
        super().__init__()
        self.own_table = torch.ones(2)

    def remember(self, x: torch.Tensor) -> None:
        self.own_state = x


def test_a_class_migrated_in_place_keeps_its_plain_bases_assignments() -> None:
    """``class Net(Mixin, Net)`` in one file: both classes have the same module and qualified
    name; the base's own tensors stay nn.Module's, the subclass's follow the table."""
    model = Net()
    model(torch.ones(2))
    model.remember(torch.ones(2))
    assert (Net.__module__, Net.__qualname__) == (PlainNet.__module__, PlainNet.__qualname__)
    assert role(model, "base_table") == "plain"
    assert role(model, "base_state") == "plain"
    assert role(model, "own_table") == "non-persistent buffer"
    assert role(model, "own_state") == "carried"


def _block_class(base: type) -> type:
    """A class factory: every class it makes shares the code of its methods."""

    class Block(base):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(1)

        def fill(self) -> None:
            self.filled = torch.ones(1)

    return Block


def test_a_class_factory_called_twice_keeps_the_plain_products_assignments() -> None:
    """The framework's class and the model's are made by one factory: the same code runs for
    both. A method that calls ``super()`` knows its class (its ``__class__`` cell): the plain
    product's ``__init__`` assigns ``table`` (nn.Module's), the autoreg product's ``__init__``
    calls it."""
    plain = _block_class(nn.Module)

    class Bridge(autoreg.AutoRegisterMixin, plain):  # type: ignore[misc, valid-type]
        pass

    model = _block_class(Bridge)()
    assert role(model, "table") == "plain"


def test_code_both_sides_share_without_a_class_cell_keeps_nn_modules_rules() -> None:
    """``fill`` runs the same code for the plain product and the autoreg one, and has no
    ``__class__`` cell to tell them apart: autoreg cannot tell whose assignment it is, so it does
    what nn.Module does, and warn mode says so."""
    plain = _block_class(nn.Module)

    class Bridge(autoreg.AutoRegisterMixin, plain, warn=True):  # type: ignore[misc, valid-type]
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)  # construction's own
        model = _block_class(Bridge)()
    with pytest.warns(
        autoreg.AutoRegisterWarning,
        match=r"cannot tell whether Block\.filled = Tensor\(shape=\(1,\).* is assigned by the code "
        r"of Block or by that of its base Block: both have the function fill\(\)",
    ):
        model.fill()
    assert role(model, "filled") == "plain"


# --- item 2: a framework that sets __module__ to a public path --------------------------------


class Published(nn.Module):
    """A framework class that says it lives at a public path (as numpy's types do)."""

    __module__ = "framework"
    __qualname__ = "Published"

    def __init__(self) -> None:
        super().__init__()
        self.framework_table = torch.zeros(1)

    def step(self) -> None:
        self.framework_state = torch.zeros(1)


class OnPublished(autoreg.AutoRegisterMixin, Published):
    __module__ = "framework"  # the model may say so too

    def __init__(self) -> None:
        super().__init__()
        self.own_table = torch.zeros(1)


def test_a_framework_that_rewrites_its_module_is_still_recognised() -> None:
    model = OnPublished()
    model.step()
    assert role(model, "framework_table") == "plain"
    assert role(model, "framework_state") == "plain"
    assert role(model, "own_table") == "non-persistent buffer"


# --- item 3: forward = fn ------------------------------------------------------------------------


class CallingBase(nn.Module):
    """A framework base with its own ``__call__`` (gpytorch's and pyro's modules have one)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


def _recurrent(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A forward written outside the class body."""
    self.h = x * 2
    return x


def _later(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    self.h = x * 3
    return x


class AssignedInTheStatement(autoreg.AutoRegisterMixin, CallingBase):
    forward = _recurrent


class AssignedLater(autoreg.AutoRegisterMixin, CallingBase):
    pass


AssignedLater.forward = _later  # type: ignore[method-assign, assignment]


@pytest.mark.parametrize(
    "cls", [AssignedInTheStatement, AssignedLater], ids=["in the statement", "after it"]
)
def test_a_function_assigned_as_a_method_is_the_classs(cls: Callable[[], nn.Module]) -> None:
    """``forward = fn``: a method of the model's class wherever ``fn`` was written, so the
    runtime state it stores is the model's, carried (the framework's ``__call__`` is further out
    on the stack, and decided before)."""
    model = cls()
    model(torch.ones(2))
    assert role(model, "h") == "carried"
    assert model.double().h.dtype == torch.float64


# --- methods found through what wraps them ----------------------------------------------------


def _logged(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return wrapper


def _unwrapped(method: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator without ``functools.wraps``: the method is only in the wrapper's closure."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return wrapper


class _Decorator:
    """A decorator written as a class (as wrapt's are): the method is what it says it wraps."""

    def __init__(self, function: Callable[..., Any]) -> None:
        functools.update_wrapper(self, function)

    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., Any]:
        return functools.partial(self.__wrapped__, instance)  # type: ignore[attr-defined]


class _Holding:
    """A decorator written as a class that does not say what it wraps: the method is only in
    its own ``__dict__``, as the closure's is of a decorator without ``functools.wraps``."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function

    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., Any]:
        return functools.partial(self.function, instance)


def _store(module: nn.Module, name: str) -> None:
    setattr(module, name, torch.zeros(1))


def _kinds(prefix: str) -> dict[str, Any]:
    """Methods of every kind, each storing ``{prefix}_{kind}`` on the instance."""

    def plain(self: nn.Module) -> None:
        _store(self, f"{prefix}_plain")

    def static(module: nn.Module) -> None:
        _store(module, f"{prefix}_static")

    def of_class(cls: type, module: nn.Module) -> None:
        _store(module, f"{prefix}_classmethod")

    def setter(self: nn.Module, value: object) -> None:
        _store(self, f"{prefix}_property")

    def partial_target(self: nn.Module, _: object) -> None:
        _store(self, f"{prefix}_partialmethod")

    def nested(self: nn.Module) -> None:
        [_store(self, f"{prefix}_comprehension") for _ in range(1)]
        (lambda: _store(self, f"{prefix}_lambda"))()

    return {
        f"do_{prefix}_plain": plain,
        f"do_{prefix}_wrapped": _logged(lambda self: _store(self, f"{prefix}_wrapped")),
        f"do_{prefix}_no_grad": torch.no_grad()(lambda self: _store(self, f"{prefix}_no_grad")),
        f"do_{prefix}_inference": torch.inference_mode()(
            lambda self: _store(self, f"{prefix}_inference")
        ),
        f"do_{prefix}_unwrapped": _unwrapped(lambda self: _store(self, f"{prefix}_unwrapped")),
        f"do_{prefix}_static": staticmethod(static),
        f"do_{prefix}_classmethod": classmethod(of_class),
        f"do_{prefix}_prop": property(lambda self: None, setter),
        f"do_{prefix}_partialmethod": functools.partialmethod(partial_target, None),
        f"do_{prefix}_nested": nested,
        f"do_{prefix}_dispatch": functools.singledispatchmethod(
            lambda self, x: _store(self, f"{prefix}_singledispatchmethod")
        ),
        f"do_{prefix}_class_decorator": _Decorator(
            lambda self: _store(self, f"{prefix}_class_decorator")
        ),
        f"do_{prefix}_cached": functools.lru_cache(maxsize=None)(
            lambda self: _store(self, f"{prefix}_lru_cache")
        ),
        f"do_{prefix}_holding": _Holding(lambda self: _store(self, f"{prefix}_holding")),
    }


KINDS = [
    "plain",
    "wrapped",
    "no_grad",
    "inference",
    "unwrapped",
    "static",
    "classmethod",
    "property",
    "partialmethod",
    "comprehension",
    "lambda",
    "singledispatchmethod",
    "class_decorator",
    "lru_cache",
    "holding",
]


def _call_all(module: Any, prefix: str) -> None:
    getattr(module, f"do_{prefix}_plain")()
    getattr(module, f"do_{prefix}_wrapped")()
    getattr(module, f"do_{prefix}_no_grad")()
    getattr(module, f"do_{prefix}_inference")()
    getattr(module, f"do_{prefix}_unwrapped")()
    getattr(module, f"do_{prefix}_static")(module)
    getattr(module, f"do_{prefix}_classmethod")(module)
    setattr(module, f"do_{prefix}_prop", 1)
    getattr(module, f"do_{prefix}_partialmethod")()
    getattr(module, f"do_{prefix}_nested")()
    getattr(module, f"do_{prefix}_dispatch")(1)
    getattr(module, f"do_{prefix}_class_decorator")()
    getattr(module, f"do_{prefix}_cached")()
    getattr(module, f"do_{prefix}_holding")()


class _Recording(nn.Module):
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


@pytest.mark.parametrize("base", [nn.Module, _Recording], ids=["base", "base with __setattr__"])
@pytest.mark.parametrize("later", [False, True], ids=["in the statement", "set after it"])
def test_every_kind_of_method_is_its_classs(base: type, later: bool) -> None:
    """The same kinds of method on the framework's class and the model's, made by one factory
    (``_kinds``): each assignment is its class's. Both classes' functions run the same code; what
    each closes over tells them apart. The shared helper ``_store`` (outside both classes) and the
    decorators' shared wrappers tell nothing; the method they serve does."""
    framework_methods, model_methods = _kinds("fw"), _kinds("own")

    def make(name: str, bases: tuple[type, ...], methods: dict[str, Any]) -> type:
        cls = type(name, bases, {} if later else dict(methods))
        if later:
            for key, value in methods.items():
                setattr(cls, key, value)
        return cls

    framework = make("Framework", (base,), framework_methods)
    model_cls = make("Model", (autoreg.AutoRegisterMixin, framework), model_methods)
    model = model_cls()
    _call_all(model, "fw")
    _call_all(model, "own")
    assert {kind: role(model, f"fw_{kind}") for kind in KINDS} == dict.fromkeys(KINDS, "plain")
    assert {kind: role(model, f"own_{kind}") for kind in KINDS} == dict.fromkeys(KINDS, "carried")


class _RaisingMeta(type):
    @property
    def __mro__(cls) -> tuple[type, ...]:  # type: ignore[override]
        raise RuntimeError("a metaclass's code ran")


class _Proxy:
    """A lazy proxy whose ``__class__`` runs code (and raises until it is resolved)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("a proxy's code ran")


def _ran(*_: object) -> Any:
    raise RuntimeError("a wrapper's code ran")


class _Partial(functools.partial):  # type: ignore[type-arg]
    func = property(_ran)  # type: ignore[assignment]


class _Property(property):
    fget = property(_ran)  # type: ignore[assignment]


class _Static(staticmethod):  # type: ignore[type-arg]
    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError("a wrapper's code ran")


class _Cached(functools.cached_property):  # type: ignore[type-arg]
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("a wrapper's code ran")


@pytest.mark.parametrize(
    "make",
    [
        _RaisingMeta("Odd", (), {}),
        _Proxy,
        lambda: staticmethod(torch.tensor([0.5, 0.5])),  # its truth raises
        lambda: _Partial(print),
        lambda: _Property(print),
        lambda: _Static(print),
        lambda: _Cached(print),
    ],
    ids=[
        "metaclass __mro__",
        "__class__",
        "staticmethod of a tensor",
        "partial subclass",
        "property subclass",
        "staticmethod subclass",
        "cached_property subclass",
    ],
)
def test_reading_a_classs_attributes_runs_none_of_their_code(make: Callable[[], object]) -> None:
    """Row 4 reads the attributes of the instance's classes for the code they are or wrap, by
    their types: an attribute whose metaclass or ``__class__`` runs code (a lazy proxy) is never
    asked, and the model's run-time store is carried, as when the attribute is not there. (Its
    ``RuntimeError`` came out of the store: found by 2026-12-07's third adversarial round.)"""

    class Framework(nn.Module):
        def run(self) -> None:
            self.step()  # type: ignore[operator]

    class Model(autoreg.AutoRegisterMixin, Framework):
        helper = make()

        def step(self) -> None:
            self.h = torch.zeros(1)

    model = Model()
    model.run()
    assert role(model, "h") == "carried"


class _Meta(type):
    """A metaclass that adds a method to every class it makes."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        def build(self: nn.Module) -> None:
            self.built = torch.zeros(1)

        namespace.setdefault("build", build)
        return super().__new__(mcs, name, bases, namespace)


def test_a_method_a_metaclass_adds_is_its_classs() -> None:
    class MetaFramework(nn.Module, metaclass=_Meta):
        pass

    class Model(autoreg.AutoRegisterMixin, MetaFramework):
        def build(self) -> None:
            self.mine = torch.zeros(1)
            super().build()

    model = Model()
    model.build()
    assert (role(model, "mine"), role(model, "built")) == ("carried", "plain")


@pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated")
def test_a_real_lightning_module_with_a_forward_written_outside_its_class() -> None:
    """The real LightningModule: its hyperparameters (set by Lightning's functions, in its
    package) stay Lightning's, the forward assigned from outside the class body is the model's."""
    pl = pytest.importorskip("lightning.pytorch")

    class Model(autoreg.AutoRegisterMixin, pl.LightningModule):  # type: ignore[misc, name-defined]
        forward = _recurrent

        def __init__(self, weights: torch.Tensor) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.table = torch.ones(2)

    model = Model(torch.ones(3))
    model(torch.ones(2))
    assert role(model, "_hparams") == "plain"
    assert role(model, "table") == "non-persistent buffer"
    assert role(model, "h") == "carried"
    model.double()
    assert (model.h.dtype, model.hparams["weights"].dtype) == (torch.float64, torch.float32)


# --- item 5: framework code that is no nn.Module, and framework functions ---------------------


class ConfigMixin:
    """A framework base that is no nn.Module (as diffusers' ``ConfigMixin``)."""

    def register_to_config(self, **config: Any) -> None:
        self._internal_dict = dict(config, scale=torch.ones(1))


class Configured(autoreg.AutoRegisterMixin, nn.Module, ConfigMixin):
    def __init__(self) -> None:
        super().__init__()
        self.register_to_config(size=2)
        self.table = torch.ones(2)


def test_state_a_framework_base_that_is_no_module_sets_is_the_frameworks() -> None:
    model = Configured()
    assert role(model, "_internal_dict") == "plain"  # a dict holding a tensor: not carried
    assert role(model, "table") == "non-persistent buffer"
    assert model.double()._internal_dict["scale"].dtype == torch.float32


_FRAMEWORK_PACKAGE = """
import torch
from torch import nn


class PyroLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)


def to_framework_module_(module, value):
    module.framework_value = value
    _helper(module, value)


def _helper(module, value):
    module.helper_value = value


def call_back(module, callback):
    callback(module)


class SettingLike(PyroLike):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)


class Extra(nn.Module):
    pass


def made(user_class):
    class Made(user_class, Extra):
        pass

    return Made


def made_by_type(user_class):
    return type("Made", (user_class, Extra), {})
"""


@pytest.fixture
def framework_package(tmp_path: Path) -> Iterator[ModuleType]:
    """A framework package of its own, on sys.path for the test: ``pkg/__init__.py`` and
    ``pkg/module.py`` (the base class and framework functions)."""
    name = f"framework_{uuid.uuid4().hex}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "module.py").write_text(textwrap.dedent(_FRAMEWORK_PACKAGE))
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(f"{name}.module", fromlist=["module"])
        yield module
    finally:
        sys.path.remove(str(tmp_path))
        for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
            del sys.modules[key]


def test_state_a_framework_function_sets_is_the_frameworks(framework_package: ModuleType) -> None:
    """pyro's ``to_pyro_module_``: a function of the package the framework base's code lives in,
    called by the user's code on the model (and the helpers it calls)."""

    class Model(autoreg.AutoRegisterMixin, framework_package.PyroLike):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(2)

    model = Model()
    framework_package.to_framework_module_(model, torch.ones(1))
    model.mine = torch.ones(1)  # the user's code: the model's
    assert role(model, "framework_value") == "plain"
    assert role(model, "helper_value") == "plain"
    assert role(model, "table") == "non-persistent buffer"
    assert role(model, "mine") == "carried"


FRAMEWORK_BASES = pytest.mark.parametrize(
    "base", ["PyroLike", "SettingLike"], ids=["base", "base with __setattr__"]
)


_PROJECT_PACKAGE = {
    "models.py": """
        import torch
        import autoreg
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)

            def forward(self, x):
                self.base_state = x.detach()
                return self.lin(x)


        class Net(autoreg.AutoRegisterMixin, Net):  # migrated in place: no function of its own
            pass
        """,
    "train.py": """
        def step(model, x):
            model.ema = x.mean(0)  # the project's training step, outside the classes
            return model(x)
        """,
}


@pytest.fixture
def project_package(tmp_path: Path) -> Iterator[dict[str, ModuleType]]:
    """A project's own package (``models.py``, ``train.py``), on sys.path for the test."""
    name = f"project_{uuid.uuid4().hex}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for file, source in _PROJECT_PACKAGE.items():
        (package / file).write_text(textwrap.dedent(source))
    sys.path.insert(0, str(tmp_path))
    try:
        yield {
            file[:-3]: __import__(f"{name}.{file[:-3]}", fromlist=["_"])
            for file in _PROJECT_PACKAGE
        }
    finally:
        sys.path.remove(str(tmp_path))
        for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
            del sys.modules[key]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_class_migrated_in_place_in_a_package_leaves_the_package_the_models(
    project_package: dict[str, ModuleType], compiled: bool
) -> None:
    """``class Net(autoreg.AutoRegisterMixin, Net): pass``, written in a module of the project's
    own package: the package is the model's, as where the class has a function of its own, and
    the state the project's training step stores is carried (a framework's factory, which runs
    a class statement in a function, leaves its package the framework's: the test below). It
    was a plain attribute, which ``.double()`` left in float32: the package of the original
    ``Net``, a framework base, was the framework's (found by 2026-12-07's seventh round; it was
    so at 926ac6e, carried at edac01d)."""
    model = project_package["models"].Net()
    step = project_package["train"].step
    if compiled:
        torch._dynamo.reset()
        step = torch.compile(step, backend="eager", fullgraph=True)
    step(model, torch.ones(3, 2))
    assert role(model, "base_state") == "plain"  # the original Net's own: row 4
    assert role(model, "ema") == "carried"
    assert model.double().ema.dtype == torch.float64


@FRAMEWORK_BASES
@pytest.mark.parametrize("held", ["staticmethod", "partial", "method"])
def test_a_framework_function_the_model_holds_leaves_the_framework_its_package(
    framework_package: ModuleType, held: str, base: str
) -> None:
    """A model class that holds a function of the framework's package (a ``staticmethod``, a
    ``functools.partial``, a function set as a method) is not written there: the package stays
    the framework's, and the state its other functions set is the framework's (found by
    2026-12-07's fifth adversarial round: it was carried, and ``.double()`` converted it)."""
    function = framework_package.call_back
    holds = {
        "staticmethod": staticmethod(function),
        "partial": functools.partial(function),
        "method": function,
    }[held]
    bases = (autoreg.AutoRegisterMixin, getattr(framework_package, base))
    model = type("Model", bases, {"collate": holds})()
    framework_package.to_framework_module_(model, torch.ones(1))
    model.mine = torch.ones(1)
    assert role(model, "framework_value") == "plain"
    assert role(model, "helper_value") == "plain"
    assert role(model, "mine") == "carried"


@FRAMEWORK_BASES
@pytest.mark.parametrize("factory", ["made", "made_by_type"])
def test_a_class_a_framework_factory_makes_leaves_the_framework_its_package(
    framework_package: ModuleType, factory: str, base: str
) -> None:
    """The framework's factory makes a class of the user's (a class statement or ``type()`` in
    the framework's package): the package stays the framework's, as the model's functions were
    written elsewhere; what its functions set on the model is the framework's (found by
    2026-12-07's sixth round: edac01d took the package of that statement for the model's)."""

    class Net(autoreg.AutoRegisterMixin, getattr(framework_package, base)):  # type: ignore[misc]
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.mine = x * 2
            return x

    model = getattr(framework_package, factory)(Net)()
    framework_package.to_framework_module_(model, torch.ones(1))
    model(torch.ones(1))
    assert role(model, "framework_value") == "plain"
    assert role(model, "helper_value") == "plain"
    assert role(model, "mine") == "carried"


def test_a_framework_function_in_a_compiled_forward_is_the_frameworks(
    framework_package: ModuleType,
) -> None:
    """Inside compiled code, a framework function the forward calls is the framework's, as in
    eager code, and the graph does not break (fullgraph)."""

    class Model(autoreg.AutoRegisterMixin, framework_package.PyroLike):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            framework_package.to_framework_module_(self, x * 2)
            self.mine = x * 3
            return x

    compiled, eager = Model(), Model()
    torch.compile(compiled, backend="eager", fullgraph=True)(torch.ones(2))
    eager(torch.ones(2))
    for model in (compiled, eager):
        assert role(model, "framework_value") == "plain"
        assert role(model, "helper_value") == "plain"
        assert role(model, "mine") == "carried"


def test_compiled_code_that_tells_nothing_is_judged_by_the_frames_that_called_it(
    framework_package: ModuleType,
) -> None:
    """A compiled function outside the classes tells nothing: the real frames that called it
    decide, as in eager code (here framework code, a trainer calling the user's callback)."""

    class Model(autoreg.AutoRegisterMixin, framework_package.PyroLike):
        pass

    def callback(module: nn.Module) -> None:
        module.state = torch.ones(1)

    compiled, eager = Model(), Model()
    framework_package.call_back(compiled, torch.compile(callback, backend="eager", fullgraph=True))
    framework_package.call_back(eager, callback)
    assert role(eager, "state") == role(compiled, "state") == "plain"


def test_a_models_method_called_by_framework_code_is_the_models(
    framework_package: ModuleType,
) -> None:
    """The nearest code that tells decides: a method of the model's class, even when framework
    code (a trainer) calls it."""

    class Model(autoreg.AutoRegisterMixin, framework_package.PyroLike):
        def on_step(self) -> None:
            self.state = torch.ones(1)

    model = Model()
    framework_package.call_back(model, Model.on_step)
    assert role(model, "state") == "carried"


# --- copies -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "copy_of",
    [copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_judges_its_first_assignments_as_the_original_does(
    copy_of: Callable[[nn.Module], nn.Module],
) -> None:
    clone = copy_of(Net())
    clone(torch.ones(2))  # the plain base's first write, on the copy
    clone.remember(torch.ones(2))  # the model's
    clone.extra = torch.zeros(1)  # the user's
    assert role(clone, "base_state") == "plain"
    assert role(clone, "own_state") == "carried"
    assert role(clone, "extra") == "carried"
    assert role(clone, "own_table") == "non-persistent buffer"


class _Double(nn.Module):
    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight * 2


class ScaledLinear(autoreg.AutoRegisterMixin, nn.Linear):
    def remember(self, x: torch.Tensor) -> None:
        self.state = x


def test_a_parametrized_instance_judges_as_its_class_did() -> None:
    """torch's parametrizations give the instance a class of its own, whose functions are
    torch's properties: they tell nothing; the model's method and nn.Linear's own code are
    judged as before."""
    model = ScaledLinear(2, 2)
    torch.nn.utils.parametrize.register_parametrization(model, "weight", _Double())
    assert type(model) is not ScaledLinear
    model.remember(torch.ones(1))
    model.reset_parameters()  # nn.Linear's own code reads the parametrized weight
    model.outside = torch.ones(1)
    assert role(model, "state") == "carried"
    assert role(model, "outside") == "carried"
    assert model.double().state.dtype == torch.float64


# --- item 6: what autoreg keeps about code ----------------------------------------------------


def test_code_that_assigns_from_outside_is_not_kept_alive() -> None:
    """A notebook cell or ``exec`` makes new code objects for every run: autoreg keeps none of
    them (each once stayed in the class's verdict cache for the life of the class)."""

    class Model(autoreg.AutoRegisterMixin, nn.Linear):
        pass

    model = Model(2, 2)
    model.first = torch.ones(1)  # the class's code is read now
    kept = len(Model.__autoreg__.codes)
    refs = []
    for i in range(20):
        namespace: dict[str, Any] = {"torch": torch}
        exec(f"def cell(model):\n    model.state_{i} = torch.ones(1)", namespace)
        refs.append(weakref.ref(namespace["cell"].__code__))
        namespace["cell"](model)
        del namespace
    gc.collect()
    assert [ref() for ref in refs] == [None] * 20
    assert len(Model.__autoreg__.codes) == kept  # the classes' own code, and nothing else
    assert role(model, "state_3") == "carried"


def test_classes_made_by_exec_are_told_apart_and_freed() -> None:
    """Two classes made from the same source by ``exec`` (a notebook cell run twice): the same
    names, the same file name, equal code objects - and two different classes."""
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Base(nn.Module):
            def fill(self, name):
                setattr(self, name, torch.ones(1))
        """
    )
    first: dict[str, Any] = {}
    exec(compile(source, "<cell>", "exec"), first)
    second: dict[str, Any] = {}
    exec(compile(source, "<cell>", "exec"), second)
    assert first["Base"].fill.__code__ == second["Base"].fill.__code__  # equal, not one

    class Model(autoreg.AutoRegisterMixin, first["Base"]):  # type: ignore[misc, name-defined]
        own_fill = second["Base"].fill  # the second cell's function: a method of the model

    model = Model()
    model.fill("framework_state")
    model.own_fill("own_state")
    assert role(model, "framework_state") == "plain"
    assert role(model, "own_state") == "carried"
    dead = weakref.ref(Model)
    del Model, model
    gc.collect()
    assert dead() is None


# --- torch's own assignments: fx's tracer, FSDP1 (by the identity of torch's functions) --------


class Traced(autoreg.Module, strict=True):
    """A strict model whose forward makes a tensor from a literal, which fx's tracer keeps on it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tensor([1.0, 2.0])


class TracedOnFramework(autoreg.AutoRegisterMixin, CallingBase, strict=True):
    forward = Traced.forward


class Tracer(torch.fx.Tracer):
    """A tracer of the test's own, as a project might write one: its own ``create_arg`` (the
    name of the function autoreg knows fx by) sets a tensor itself before deferring to fx."""

    def create_arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dim() == 2:
            self.root.own_constant = a.clone()  # type: ignore[union-attr]  # the project's
        return super().create_arg(a)


@pytest.mark.parametrize("cls", [Traced, TracedOnFramework], ids=["module", "on-a-framework"])
def test_the_constant_fxs_tracer_sets_is_torchs_on_any_class(cls: type[nn.Module]) -> None:
    """fx sets ``_tensor_constant0`` on the module it traces: nn.Module's plain attribute (row
    4), which strict mode never refuses and ``.to()`` leaves, whether or not the class has a
    framework base (whose row 4 judges frames: fx's own tell nothing there)."""
    module = cls()
    traced = torch.fx.symbolic_trace(module)
    assert role(module, "_tensor_constant0") == "plain"
    assert module.double()._tensor_constant0.dtype == torch.float32
    module._tensor_constant0 = torch.zeros(2)  # the first assignment decided: still torch's
    assert role(module, "_tensor_constant0") == "plain"
    torch.testing.assert_close(traced(torch.zeros(2)), torch.tensor([1.0, 2.0]))


def test_a_tracer_of_a_projects_own_named_as_fxs_function_is_the_models() -> None:
    """Known by identity: the project's ``create_arg`` is not fx's, though named the same. What
    it sets is the model's (strict mode refuses it); what fx's sets beside it is torch's."""

    class Model(autoreg.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.ones(2, 2)

    model = Model()
    Tracer().trace(model)
    assert role(model, "own_constant") == "carried"
    assert role(model, "_tensor_constant0") == "plain"
    with pytest.raises(autoreg.UnregisteredTensorError, match="own_constant"):
        Tracer().trace(StrictModel())


class StrictModel(autoreg.Module, strict=True):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.ones(2, 2)


def _safe_setattr_tensor_or_param(module: nn.Module, name: str, tensor: torch.Tensor) -> None:
    """The model's own function, under the name of FSDP1's."""
    setattr(module, name, tensor)


def test_a_function_of_the_models_named_as_fsdp1s_is_the_models() -> None:
    module = autoreg.Module()
    _safe_setattr_tensor_or_param(module, "state", torch.ones(2))
    assert role(module, "state") == "carried"
    assert module.double().state.dtype == torch.float64


def test_whether_torch_made_an_assignment_is_asked_once_per_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first run-time store reads its caller's frame once; the role it leaves answers every
    later assignment of the name. A name whose role stays unset (a buffer registered by hand, a
    declared plain attribute, a pruned weight, None, a number) never has its frame read."""
    from autoreg import _mixin

    asked: list[int] = []

    class Counting(dict):  # type: ignore[type-arg]
        def __contains__(self, key: object) -> bool:
            asked.append(1)
            return super().__contains__(key)

    monkeypatch.setattr(_mixin, "TORCH_ASSIGNS", Counting(_mixin.TORCH_ASSIGNS))

    class Model(autoreg.Module):
        plain: autoreg.Plain

        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(2, 2))
            self.table = torch.ones(2)  # being built: never asked
            self.register_buffer("running", torch.zeros(2))  # by hand: no role; never asked

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.weight  # pruned: its hook sets the weight at every call

    model = Model()
    nn.utils.prune.l1_unstructured(model, "weight", amount=0.5)
    assert asked == []
    for step in range(3):
        model(torch.ones(2))
        model.state = torch.full((2,), float(step))
        model.running = torch.full((2,), float(step))  # a buffer's update (row 3)
        model.plain = torch.ones(2)
        model.cache = None
        model.count = step
    assert asked == [1]  # the first store of model.state
    assert role(model, "state") == "carried"


class TracedWithItsOwnSetattr(autoreg.Module):
    """A class of the model's own that overrides ``__setattr__`` (every assignment passes it
    first, then the mixin's)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)

    forward = Traced.forward


def test_fxs_constant_is_torchs_past_the_models_setattr_and_in_its_copies() -> None:
    module = TracedWithItsOwnSetattr()
    torch.fx.symbolic_trace(module)
    assert role(module, "_tensor_constant0") == "plain"
    for copied in (copy.deepcopy(module), pickle.loads(pickle.dumps(module))):
        assert role(copied, "_tensor_constant0") == "plain"
        assert copied.double()._tensor_constant0.dtype == torch.float32  # left, as nn.Module


# --- torch.func: functional_call swaps a tensor in under a name the module does not have ------


class Functional(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        extra = self.__dict__.get("extra")
        return self.linear(x) if extra is None else self.linear(x) + extra


class FunctionalTwin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    forward = Functional.forward


class FunctionalOnFramework(autoreg.AutoRegisterMixin, CallingBase):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    forward = Functional.forward


class FunctionalOnSettingFramework(autoreg.AutoRegisterMixin, _Recording):
    """On a framework base with a ``__setattr__`` of its own, which the mixin passes last."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    forward = Functional.forward


@pytest.mark.parametrize(
    "mode", [{}, {"warn": True}, {"strict": True}], ids=["register", "warn", "strict"]
)
@pytest.mark.parametrize(
    "base",
    [Functional, FunctionalOnFramework, FunctionalOnSettingFramework],
    ids=["module", "on-a-framework", "on-a-framework-with-setattr"],
)
def test_a_tensor_functional_call_swaps_in_under_a_new_name_is_torchs(
    base: type[nn.Module], mode: dict[str, bool]
) -> None:
    """``torch.func.functional_call(model, {"extra": t}, x, strict=False)`` sets ``extra`` on
    the module for the call (torch's ``swap_tensor``) and deletes it after: a plain attribute on
    nn.Module. Never refused, warned about (warnings are errors in this suite) nor carried, and
    nothing of it is left. main: strict mode raised UnregisteredTensorError, warn mode warned."""
    cls = type("Model", (base,), {"__module__": __name__}, **mode)
    model = cls()
    twin = copy.deepcopy(model)
    extra = torch.full((2,), 5.0)
    out = torch.func.functional_call(model, {"extra": extra}, (torch.ones(2),), strict=False)
    torch.testing.assert_close(out, twin(torch.ones(2)) + extra)
    assert "extra" not in vars(model)
    # the name's role gone (a deleted name's key holds None: _mixin.__delattr__ says why)
    assert not [k for k, v in vars(model).items() if k.startswith("_autoreg_role") and v]
    assert "_autoreg_role_extra" not in copy.copy(model).__dict__  # nor kept by copies
    if not mode.get("strict"):  # the name is new again: a store of the model's is carried
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.extra = torch.ones(2)
        assert role(model, "extra") == "carried"


@pytest.mark.xfail(
    torch.__version__ < "2.8",
    strict=False,  # measured on every version from 2.5.1 to 2.15.0 (2.6.0 and 2.7.1 fail too)
    reason="dynamo 2.5 to 2.7 traces functional_call's deletion of the name as a store through "
    "the module's __setattr__, which it cannot trace on an autoreg module (2 frames, not 1)",
)
@pytest.mark.parametrize(
    "mode", [{}, {"warn": True}, {"strict": True}], ids=["register", "warn", "strict"]
)
def test_a_tensor_functional_call_swaps_in_under_a_new_name_is_torchs_in_compiled_code(
    mode: dict[str, bool],
) -> None:
    """The same inside a compiled function: never more frames than the plain module's, and
    ``fullgraph=True`` compiles wherever it compiles the plain module; nothing left or carried.
    main: strict mode raised UnregisteredTensorError (wrapped in dynamo's Unsupported), warn
    mode broke the graph (2 frames), and the name was carried for the call (only eager code
    read torch's frame)."""
    from torch._dynamo.exc import Unsupported
    from torch._dynamo.testing import CompileCounterWithBackend

    def run(cls: type[nn.Module], fullgraph: bool) -> tuple[torch.Tensor, int]:
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = cls()
        params = dict(model.named_parameters())

        def step(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
            extra = {"extra": torch.ones(2)}
            return torch.func.functional_call(model, {**p, **extra}, (x,), strict=False)

        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(step, backend=counter, fullgraph=fullgraph)
        outs = [compiled(params, torch.ones(2)) for _ in range(2)]
        assert "extra" not in vars(model)
        assert not [k for k, v in vars(model).items() if k.startswith("_autoreg_role") and v]
        return outs[-1], int(counter.frame_count)

    auto = type("Model", (Functional,), {"__module__": __name__}, **mode)
    expected, frames = run(FunctionalTwin, fullgraph=False)
    out, auto_frames = run(auto, fullgraph=False)
    torch.testing.assert_close(out, expected)
    assert 1 <= auto_frames <= frames
    try:
        run(FunctionalTwin, fullgraph=True)
    except Unsupported:  # torch 2.8: functional_call's context manager, on nn.Module too
        return
    out, auto_frames = run(auto, fullgraph=True)
    torch.testing.assert_close(out, expected)
    assert auto_frames == 1


@pytest.mark.parametrize("mode", [{}, {"strict": True}], ids=["register", "strict"])
def test_functional_call_through_a_plain_root_is_torchs_on_the_autoreg_child(
    mode: dict[str, bool],
) -> None:
    """The key names the child under a plain ``nn.Sequential``: torch sets it on the child."""
    child = type("Model", (Functional,), {"__module__": __name__}, **mode)()
    root = nn.Sequential(child)
    twin = copy.deepcopy(root)
    extra = torch.full((2,), 5.0)
    out = torch.func.functional_call(root, {"0.extra": extra}, (torch.ones(2),), strict=False)
    torch.testing.assert_close(out, twin(torch.ones(2)) + extra)
    assert "extra" not in vars(child)


def _store_then_delete(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    self.h = self.linear(x) + self.h  # the carried state, replaced for the call
    out = self.h.sum(-1)
    del self.h  # then dropped
    return out


class Dropping(autoreg.Module):
    forward = _store_then_delete

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)


class DroppingTwin(nn.Module):
    """Its runtime state ``h`` is a plain attribute that its own ``.to()`` moves."""

    forward = _store_then_delete

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        result = super()._apply(fn, recurse)
        if isinstance(self.__dict__.get("h"), torch.Tensor):
            self.h = fn(self.h)
        return result


@pytest.mark.parametrize("swapped", [False, True], ids=["parameters", "state swapped too"])
@pytest.mark.parametrize("batched", [False, True], ids=["functional_call", "vmap"])
def test_a_carried_name_a_forward_stores_and_deletes_under_functional_call_is_the_twins_after(
    batched: bool, swapped: bool
) -> None:
    """``functional_call`` (under ``vmap`` or not) of a forward that stores its carried state and
    deletes it: the twin's outputs, and afterwards what the twin holds, converted as the twin's
    ``.to()`` converts it. With the state in the dict too, torch puts the original back after
    the forward deleted it: that is the model's state, carried still; it was taken for torch's
    own new name (row 4), left behind by ``.to()`` for good, also when the model stored it again."""
    outs, held = [], []
    for cls in (Dropping, DroppingTwin):
        torch.manual_seed(0)
        model = cls()
        model.h = torch.zeros(2)
        params: dict[str, torch.Tensor] = dict(model.named_parameters())
        if swapped:
            params["h"] = torch.ones(3, 2) if batched else torch.ones(2)

        def call(p: dict[str, torch.Tensor], x: torch.Tensor, model: nn.Module = model) -> Any:
            return torch.func.functional_call(model, p, (x,), strict=False)

        x = torch.ones(3, 2)
        if batched:  # the parameters shared, the swapped state and the input per sample
            dims = ({k: 0 if k == "h" else None for k in params}, 0)
            outs.append(torch.func.vmap(call, in_dims=dims)(params, x))
        else:
            outs.append(call(params, x))
        model.double()
        held.append({k: v.dtype for k, v in vars(model).items() if isinstance(v, torch.Tensor)})
        if "h" in vars(model):
            model.h = torch.zeros(2)  # the model's own store, afterwards
            held.append(model.double().h.dtype)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    assert held[: len(held) // 2] == held[len(held) // 2 :]
    assert held[0] == ({"h": torch.float64} if swapped else {})


class _Probing(Functional):
    """Records, inside its forward, what ``extra`` is; copies with the textbook ``__getstate__``
    (which shares autoreg's list of carried names with the copy)."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.__dict__.setdefault("seen", []).append(role(self, "extra"))
        return super().forward(x)


def test_a_name_only_a_copy_carried_is_torchs_when_functional_call_sets_it_on_the_original() -> (
    None
):
    """A textbook copy (or a replica) shares the list of carried names with its original: a name
    the copy carried is in the original's list too, but the original never carried it, and
    ``functional_call`` setting it there is torch's (row 4), a plain attribute for the call."""
    original = _Probing()
    original.state = torch.zeros(2)  # carried: the original has a list, which the copy shares
    copy.copy(original).extra = torch.zeros(2)  # carried by the copy, listed in both
    torch.func.functional_call(original, {"extra": torch.ones(2)}, (torch.ones(2),), strict=False)
    assert original.__dict__["seen"] == ["plain"]


def test_a_carried_name_a_forward_deletes_under_a_compiled_functional_call_stays_carried() -> None:
    """The same inside a compiled function: what torch puts back is the model's state. (It was
    torch's for good: a deletion set the name's role to None, and compiled code, which cannot read
    the list of names the model carried without guarding on it, took the name for a new one.)"""
    torch._dynamo.reset()
    model = Dropping()
    model.h = torch.zeros(2)
    params = {**dict(model.named_parameters()), "h": torch.ones(2)}

    def step(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(model, p, (x,), strict=False)

    torch.compile(step, backend="eager")(params, torch.ones(3, 2))
    torch._dynamo.reset()
    assert role(model, "h") == "carried"


def swap_tensor(module: nn.Module, name: str, tensor: torch.Tensor) -> None:
    """The model's own function, under the name of torch's that functional_call uses."""
    setattr(module, name, tensor)


def test_a_function_of_the_models_named_as_functional_calls_is_the_models() -> None:
    module = StrictModel()
    with pytest.raises(autoreg.UnregisteredTensorError, match="state"):
        swap_tensor(module, "state", torch.ones(2))
    plain = autoreg.Module()
    swap_tensor(plain, "state", torch.ones(2))
    assert role(plain, "state") == "carried"


def _passing_on(method: Callable[..., None]) -> Callable[..., None]:
    """A decorator around a ``__setattr__`` override: its frame's code is the wrapper's."""

    @functools.wraps(method)
    def wrapper(self: nn.Module, name: str, value: Any) -> None:
        method(self, name, value)

    return wrapper


class DecoratedSetattr(autoreg.Module, strict=True):
    """A strict model whose ``__setattr__`` override is decorated."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2, 2))

    @_passing_on
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + torch.tensor([1.0, 2.0])


def test_the_overrides_of_setattr_are_passed_by_identity_decorated_or_not() -> None:
    """The frames between an assignment and the mixin's ``__setattr__`` that are the instance's
    own overrides are known by the functions in its classes, not by the name ``__setattr__``: a
    decorated override's frame is the wrapper's. fx's constant and prune's first write of its
    weight are torch's, as on the twin (strict mode refused both when the walk went by name)."""
    module = DecoratedSetattr()
    torch.fx.symbolic_trace(module)
    assert role(module, "_tensor_constant0") == "plain"
    nn.utils.prune.l1_unstructured(module, "weight", amount=0.5)
    assert role(module, "weight") == "plain"
    module.double()(torch.ones(2, 2, dtype=torch.float64))
    assert module.weight.dtype == torch.float64  # recomputed by prune's hook, as on the twin


class _Link:
    """A callable object holding the next: a chain the model's class holds."""

    def __init__(self, following: object) -> None:
        self.following = following

    def __call__(self) -> None:
        pass


def test_a_chain_of_objects_a_class_holds_is_followed_no_deeper_than_wrappers_go() -> None:
    """2,000 callable objects, each holding the next: the model's first run-time store is
    judged (what a decorator object holds is followed a few levels, as wrappers of wrappers go),
    where following them all raised RecursionError (found by 2026-12-07's sixth round)."""
    chain: object = None
    for _ in range(2000):
        chain = _Link(chain)

    class Model(autoreg.AutoRegisterMixin, CallingBase):
        held = chain

        def remember(self) -> None:
            self.state = torch.ones(1)

    model = Model()
    model.remember()
    assert role(model, "state") == "carried"
