"""``autoreg fix --style buffer`` consults the source even for a store that ran: where the source
shows that the same store may store a value a buffer does not take in a configuration the factory
did not build (``t if use_bias else 0.0``, a parameter whose default is a float), the store is
listed, not rewritten into ``register_buffer``, which would raise in that configuration. What the
source leaves unknown (a call of the project's own function) is still rewritten, as the run saw
it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .fix_support import Project, project

__all__ = ["project"]

# The store ran with a tensor (use_bias=True); use_bias=False stores a float.
CONDITIONAL = """\
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, dim, use_bias=True):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.scale = torch.ones(dim)
        self.bias = torch.full((dim,), 0.1) if use_bias else 0.0

    def forward(self, x):
        return self.lin(x) * self.scale + self.bias


def build():
    return Gate(4), (torch.randn(2, 4),)
"""

# The factory passes a tensor; Focal() stores the float default.
DEFAULT = """\
import torch
from torch import nn


class Focal(nn.Module):
    def __init__(self, alpha=0.25):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.alpha = alpha

    def forward(self, x):
        return self.lin(x) * self.alpha


def build():
    return Focal(torch.tensor([0.2, 0.3, 0.5])), (torch.randn(2, 4),)
"""

# The conditional is bound to a local first.
LOCAL = """\
import torch
from torch import nn


class Shift(nn.Module):
    def __init__(self, dim, learned=True):
        super().__init__()
        offset = torch.zeros(dim) if learned else 1
        self.offset = offset

    def forward(self, x):
        return x + self.offset


def build():
    return Shift(4), (torch.randn(2, 4),)
"""

# A boolean operation: temperature=None stores the float.
FALLBACK = """\
import torch
from torch import nn


class Softmax(nn.Module):
    def __init__(self, temperature=None):
        super().__init__()
        self.temperature = temperature or 1.0

    def forward(self, x):
        return (x / self.temperature).softmax(-1)


def build():
    return Softmax(torch.tensor(0.5)), (torch.randn(2, 4),)
"""

# An empty dict display (its braces quoted in the message) and an nn.Parameter in the other branch.
DISPLAY_OR_PARAMETER = """\
import torch
from torch import nn


class Cached(nn.Module):
    def __init__(self, warm=True, learn=False):
        super().__init__()
        self.cache = torch.zeros(3) if warm else {}
        self.weight = nn.Parameter(torch.ones(3)) if learn else torch.ones(3)

    def forward(self, x):
        return x * self.weight + self.cache


def build():
    return Cached(), (torch.randn(2, 3),)
"""

# Defaults the source names without spelling the value: a module constant, math.pi, and a
# dict's get(key, default).
NAMED_DEFAULTS = """\
import math

import torch
from torch import nn

DEFAULT_SCALE = 0.5


class Scaled(nn.Module):
    def __init__(self, scale=DEFAULT_SCALE, angle=math.pi, **options):
        super().__init__()
        self.scale = scale
        self.angle = angle
        self.alpha = options.get("alpha", 0.25)

    def forward(self, x):
        return x * self.scale * self.angle * self.alpha


def build():
    one = torch.tensor(1.0)
    return Scaled(one, one, alpha=one), (torch.randn(2, 3),)
"""

# The idiom that accepts a number or a tensor and always stores a tensor.
GUARDED = """\
import torch
from torch import nn


class Guarded(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale if isinstance(scale, torch.Tensor) else torch.tensor(scale)

    def forward(self, x):
        return x * self.scale


def build():
    return Guarded(), (torch.randn(2, 3),)
"""

# Tests that prove nothing about the name: a tuple of types, a class of another library's named
# Tensor.
LOOSE_CHECKS = """\
import torch
from torch import nn


class Tensor:
    pass


class Loose(nn.Module):
    def __init__(self, scale=1.0, shift=2.0):
        super().__init__()
        self.scale = scale if isinstance(scale, (torch.Tensor, float)) else torch.tensor(scale)
        self.shift = shift if isinstance(shift, Tensor) else torch.tensor(0.0)

    def forward(self, x):
        return x * self.scale + self.shift


def build():
    return Loose(torch.tensor(2.0), torch.tensor(1.0)), (torch.randn(2, 3),)
"""

# A store in forward: once __init__ registers the buffer, storing the float there raises too.
IN_FORWARD = """\
import torch
from torch import nn


class Decay(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.zeros(3)

    def forward(self, x, keep=True):
        self.state = self.state * 0.9 if keep else 0.0
        return x + self.state


def build():
    return Decay(), (torch.randn(2, 3),)
"""

# Guards: what a buffer takes in every configuration, or what the source leaves unknown.
TENSOR_OR_NONE = """\
import torch
from torch import nn


class Masked(nn.Module):
    def __init__(self, flag=True):
        super().__init__()
        self.mask = torch.ones(3) if flag else None

    def forward(self, x):
        return x if self.mask is None else x * self.mask


def build():
    return Masked(), (torch.randn(2, 3),)
"""

UNKNOWN_CALL = """\
import torch
from torch import nn


def make_table(n):
    return torch.arange(n).float()


class Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = make_table(3)

    def forward(self, x):
        return x + self.table


def build():
    return Table(), (torch.randn(2, 3),)
"""

FUNCTION_MAY_RETURN_A_FLOAT = """\
import torch
import torch.nn.functional as F
from torch import nn


def scale_for(n):
    if n > 8:
        return 1.0
    return torch.ones(n)


class Scaled(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.scale = scale_for(n)

    def forward(self, x):
        return x * self.scale


class Lossy(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(4, 3)

    def _loss(self, logits, targets):
        if targets is None:
            return 0.0
        return F.cross_entropy(logits, targets)

    def forward(self, x, targets=None):
        logits = self.out(x)
        self.last_loss = self._loss(logits, targets)
        return logits


def build():
    return BUILT
"""

CALLS_ELSEWHERE = """\
import torch
from torch import nn


class Nested(nn.Module):
    def __init__(self, n=4, on=True):
        super().__init__()

        def make():
            if on:
                return torch.ones(n)
            return 0.0

        self.s = make()

    def forward(self, x):
        return x + self.s


class Scaled(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.s = self.scale(n)

    def scale(self, n):
        return torch.ones(n)

    def forward(self, x):
        return x + self.s


class HalfScaled(Scaled):
    def scale(self, n):
        return 0.5


class Static(nn.Module):
    def __init__(self, n=4, on=True):
        super().__init__()
        self.s = Static.make(n, on)

    @staticmethod
    def make(n, on):
        return torch.ones(n) if on else 0.0

    def forward(self, x):
        return x + self.s


def build():
    return MODEL(), (torch.randn(2, 4),)
"""

LEARNED_ON_REQUEST = """\
import torch
from torch import nn


class Weighting(nn.Module):
    def __init__(self, steps=6, learn=False):
        super().__init__()
        self.logvar = torch.zeros(steps)
        if learn:
            self.logvar = nn.Parameter(self.logvar)

    def forward(self, t):
        return self.logvar[t].exp()


def build():
    return Weighting(), (torch.tensor([1, 3]),)
"""

NONE_DEFAULT = """\
import torch
from torch import nn


class Prior(nn.Module):
    def __init__(self, prior=None):
        super().__init__()
        self.prior = prior

    def forward(self, x):
        return x if self.prior is None else x + self.prior


def build():
    return Prior(torch.zeros(3)), (torch.randn(2, 3),)
"""


def _added(out: str) -> list[str]:
    return [line[1:].strip() for line in out.splitlines() if line[:1] == "+" and line[:3] != "+++"]


def _removed(out: str) -> list[str]:
    return [line[1:].strip() for line in out.splitlines() if line[:1] == "-" and line[:3] != "---"]


# The other branch stores a Python number (or list) made from a tensor or a number: .item(),
# float(), int(), math.sqrt(), .tolist() never give a tensor.
NUMBERS = """\
import math

import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, eps=1e-5, eps_tensor=True):
        super().__init__()
        eps_t = torch.tensor(eps)
        self.eps = eps_t if eps_tensor else eps_t.item()
        self.gain = torch.tensor(2.0) if eps_tensor else float(eps)
        self.steps = torch.tensor(3) if eps_tensor else int(eps)
        self.root = torch.sqrt(eps_t) if eps_tensor else math.sqrt(eps)
        self.values = eps_t.reshape(1) if eps_tensor else eps_t.reshape(1).tolist()

    def forward(self, x):
        return x / (x.pow(2).mean() + self.eps + self.root) * self.gain * self.steps * self.values


def build():
    return Norm(), (torch.randn(2, 4),)
"""


# dreamerv3-torch's MLP: a string option ("learned") or a number made a tensor.
STRING_OR_TENSOR = """
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, std=1.0):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.std = std if isinstance(std, str) else torch.tensor((std,))

    def forward(self, x):
        return self.linear(x) * self.std


def build():
    return Head(), (torch.randn(2, 4),)
"""


def _line(source: str, text: str) -> int:
    return [line.strip() for line in source.splitlines()].index(text) + 1


def _listed(value: str) -> str:
    return (
        "a tensor in the configuration the factory built, but the source may store "
        f"{value} here in another, and a buffer takes only a tensor or None"
    )


LISTED = [
    pytest.param(
        CONDITIONAL,
        "self.bias = torch.full((dim,), 0.1) if use_bias else 0.0",
        "Gate.bias",
        "0.0",
        ['self.register_buffer("scale", torch.ones(dim), persistent=False)'],
        id="conditional-expression",
    ),
    pytest.param(
        DEFAULT,
        "self.alpha = alpha",
        "Focal.alpha",
        "0.25 (the default of alpha)",
        [],
        id="parameter-with-a-float-default",
    ),
    pytest.param(
        LOCAL,
        "self.offset = offset",
        "Shift.offset",
        "1",
        [],
        id="local-bound-to-a-conditional",
    ),
    pytest.param(
        FALLBACK,
        "self.temperature = temperature or 1.0",
        "Softmax.temperature",
        "1.0",
        [],
        id="boolean-operation",
    ),
    pytest.param(
        DISPLAY_OR_PARAMETER,
        "self.cache = torch.zeros(3) if warm else {}",
        "Cached.cache",
        "{}",
        [],
        id="container-display",
    ),
    pytest.param(
        DISPLAY_OR_PARAMETER,
        "self.weight = nn.Parameter(torch.ones(3)) if learn else torch.ones(3)",
        "Cached.weight",
        "nn.Parameter(torch.ones(3))",
        [],
        id="parameter-in-the-other-branch",
    ),
    pytest.param(
        IN_FORWARD,
        "self.state = self.state * 0.9 if keep else 0.0",
        "Decay.state",
        "0.0",
        [],  # registered in __init__, the name would refuse the float forward stores
        id="store-in-forward",
    ),
    pytest.param(
        NAMED_DEFAULTS,
        "self.scale = scale",
        "Scaled.scale",
        "DEFAULT_SCALE (the default of scale)",
        [],
        id="a-module-constant-default",
    ),
    pytest.param(
        NAMED_DEFAULTS,
        "self.angle = angle",
        "Scaled.angle",
        "math.pi (the default of angle)",
        [],
        id="an-attribute-default",
    ),
    pytest.param(
        NAMED_DEFAULTS,
        'self.alpha = options.get("alpha", 0.25)',
        "Scaled.alpha",
        "0.25",
        [],
        id="the-default-of-get",
    ),
    pytest.param(
        LOOSE_CHECKS,
        "self.scale = scale if isinstance(scale, (torch.Tensor, float)) else torch.tensor(scale)",
        "Loose.scale",
        "1.0 (the default of scale)",
        [],
        id="a-check-against-a-tuple-of-types",
    ),
    pytest.param(
        FUNCTION_MAY_RETURN_A_FLOAT.replace("BUILT", "Scaled(), (torch.randn(2, 4),)"),
        "self.scale = scale_for(n)",
        "Scaled.scale",
        "1.0",
        [],
        id="a-project-function-that-may-return-a-float",
    ),
    pytest.param(
        FUNCTION_MAY_RETURN_A_FLOAT.replace(
            "BUILT", "Lossy(), (torch.randn(3, 4), torch.tensor([0, 1, 2]))"
        ),
        "self.last_loss = self._loss(logits, targets)",
        "Lossy.last_loss",
        "0.0",
        [],
        id="a-method-that-may-return-a-float",
    ),
    pytest.param(
        CALLS_ELSEWHERE.replace("MODEL", "Nested"),
        "self.s = make()",
        "Nested.s",
        "0.0",
        [],
        id="a-function-nested-in-the-method",
    ),
    pytest.param(
        CALLS_ELSEWHERE.replace("MODEL", "Scaled"),
        "self.s = self.scale(n)",
        "Scaled.s",
        "0.5",
        [],
        id="a-method-a-subclass-overrides",
    ),
    pytest.param(
        CALLS_ELSEWHERE.replace("MODEL", "Static"),
        "self.s = Static.make(n, on)",
        "Static.s",
        "0.0",
        [],
        id="a-static-method-called-through-the-class",
    ),
    *(
        pytest.param(NUMBERS, f"self.{name} = {value}", f"Norm.{name}", other, [], id=name)
        for name, value, other in (
            ("eps", "eps_t if eps_tensor else eps_t.item()", "eps_t.item()"),
            ("gain", "torch.tensor(2.0) if eps_tensor else float(eps)", "float(eps)"),
            ("steps", "torch.tensor(3) if eps_tensor else int(eps)", "int(eps)"),
            ("root", "torch.sqrt(eps_t) if eps_tensor else math.sqrt(eps)", "math.sqrt(eps)"),
            (
                "values",
                "eps_t.reshape(1) if eps_tensor else eps_t.reshape(1).tolist()",
                "eps_t.reshape(1).tolist()",
            ),
        )
    ),
    pytest.param(
        LOOSE_CHECKS,
        "self.shift = shift if isinstance(shift, Tensor) else torch.tensor(0.0)",
        "Loose.shift",
        "2.0 (the default of shift)",
        [],
        id="a-check-against-another-class-named-tensor",
    ),
    pytest.param(
        STRING_OR_TENSOR,
        "self.std = std if isinstance(std, str) else torch.tensor((std,))",
        "Head.std",
        "std",  # was "1.0 (the default of std)", which takes the tensor branch
        [],
        id="a-branch-taken-only-for-a-string",
    ),
]


@pytest.mark.parametrize(("source", "store", "name", "value", "added"), LISTED)
def test_a_store_that_ran_with_a_tensor_but_may_store_another_value_is_listed(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    source: str,
    store: str,
    name: str,
    value: str,
    added: list[str],
) -> None:
    """Before: the store was rewritten into register_buffer, which raises TypeError in the
    configuration that stores the other value."""
    project.write("m", source)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == added
    assert store not in _removed(out)
    line = _line(source, store)
    assert f"  {project.name}/m.py:{line}: {name}: {_listed(value)}\n" in err
    attribute = name.partition(".")[2]
    assert (
        f"      keep self.{attribute} a plain attribute, or register it only when it is a tensor: "
        f'self.register_buffer("{attribute}", value, persistent=False) if isinstance(value, '
        f"torch.Tensor), else self.{attribute} = value\n"
    ) in err


REWRITTEN = [
    pytest.param(
        TENSOR_OR_NONE,
        'self.register_buffer("mask", torch.ones(3) if flag else None, persistent=False)',
        id="tensor-or-none",
    ),
    pytest.param(
        UNKNOWN_CALL,
        'self.register_buffer("table", make_table(3), persistent=False)',
        id="call-of-a-project-function",
    ),
    pytest.param(
        NONE_DEFAULT,
        'self.register_buffer("prior", prior, persistent=False)',
        id="parameter-with-a-none-default",
    ),
    pytest.param(
        LEARNED_ON_REQUEST,
        'self.register_buffer("logvar", torch.zeros(steps), persistent=False)',
        id="a-parameter-stored-over-the-buffer-later",
    ),
    pytest.param(
        GUARDED,
        'self.register_buffer("scale", scale if isinstance(scale, torch.Tensor) else '
        "torch.tensor(scale), persistent=False)",
        id="a-branch-taken-only-for-a-tensor",
    ),
]


@pytest.mark.parametrize(("source", "added"), REWRITTEN)
def test_a_store_whose_source_shows_no_other_value_is_still_rewritten(
    project: Project, capsys: pytest.CaptureFixture[str], source: str, added: str
) -> None:
    project.write("m", source)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert _added(out) == [added]
    assert "left for you to edit" not in err
    assert status == 1  # a diff to apply


BUILD_OTHER = """\
import torch
from {package}.m import Gate
model = Gate(4, use_bias=False)
print(model(torch.randn(2, 4)).shape, sorted(name for name, _ in model.named_buffers()))
"""


@pytest.mark.slow
def test_the_written_package_still_builds_the_configuration_the_factory_did_not_build(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Gate(4, use_bias=False) raised TypeError: cannot assign 'float' object to buffer
    'bias'."""
    project.write("m", CONDITIONAL)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1, err  # Gate.bias is left for you
    assert 'self.register_buffer("scale", torch.ones(dim), persistent=False)' in project.read("m")
    result = subprocess.run(
        [sys.executable, "-c", BUILD_OTHER.format(package=project.name)],
        cwd=project.root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "torch.Size([2, 4]) ['scale']\n"


SETTER = """\
import torch
from torch import nn


class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.temperature = torch.tensor(1.0)

    def set_temperature(self, t: float):
        self.temperature = t

    def forward(self, x):
        return self.lin(x) / self.temperature


def build():
    return Scaler(), (torch.randn(2, 4),)
"""


def test_a_name_another_method_stores_a_float_under_is_not_registered_at_all(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The setter stores a float where ``register_buffer`` would make the name a buffer, which
    refuses it. Before: the construction store was rewritten and the setter listed, so the
    written model raised in ``set_temperature(2.0)``, and a second run, finding nothing left,
    exited 0 with the hazard forgotten. Now no store of the name is rewritten: the model works
    as before, and every run lists it."""
    project.write("m", SETTER)
    for _ in range(2):
        status, _, err = project.fix(
            capsys, f"{project.name}.m:build", "--style", "buffer", "--write"
        )
        assert status == 1
        assert "m.py:12: Scaler.temperature" in err  # the setter's store
        assert "m.py:9: Scaler.temperature" in err  # the store held back with it
    model = project.load().build()[0]
    model.set_temperature(2.0)
    assert model.temperature == 2.0


def test_a_parameter_stored_over_the_buffer_later_stays_a_parameter(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``self.logvar = nn.Parameter(self.logvar)`` after the buffer is registered: nn.Module
    replaces the buffer with the parameter, as it replaced the plain attribute. Before: listed,
    with an edit (register the parameter as a buffer) that would drop the learned weight from
    ``parameters()`` and the checkpoint."""
    project.write("m", LEARNED_ON_REQUEST)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 0, err
    module = project.load()
    learned = module.Weighting(learn=True)
    assert [name for name, _ in learned.named_parameters()] == ["logvar"]
    assert list(learned.state_dict()) == ["logvar"]
    fixed = module.Weighting()
    assert list(fixed.state_dict()) == []
    assert "logvar" in dict(fixed.named_buffers())
