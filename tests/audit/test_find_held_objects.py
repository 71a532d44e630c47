"""``find_unregistered`` reports tensors held inside plain objects, and numpy arrays.

``.to()`` converts a module's parameters and buffers (and what autoreg carries); a tensor inside a
dataclass, a ``types.SimpleNamespace`` or any object held in a public attribute stays where it
is, and so does every numpy array. The audit finds them by type, in the object's fields (its
``__dict__`` and ``__slots__``, and the containers they hold) and in the public fields of the plain
objects there, three objects deep, never by running the object's code.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import autoreg
from tests.audit import real_patterns as rp


class Box(nn.Module):
    """A plain module that holds whatever the test puts on it."""


class AutoBox(autoreg.Module):
    """An autoreg module that holds whatever the test puts on it (after construction: carried)."""


@dataclasses.dataclass
class Config:
    scale: torch.Tensor
    table: dict[str, torch.Tensor]
    name: str = "config"


def table(module: nn.Module) -> list[tuple[str, str, str]]:
    return [(f.path, f.class_name, f.attribute) for f in autoreg.find_unregistered(module)]


def test_tensors_in_a_dataclass_a_namespace_and_slots_are_reported_with_their_paths() -> None:
    assert table(rp.Holders()) == [
        ("stats.mean", "Holders", "stats"),
        ("stats.std", "Holders", "stats"),
        ("slotted.offsets", "Holders", "slotted"),
        ("window", "Holders", "window"),
    ]


def test_a_config_dataclass_is_walked_one_level_with_its_containers() -> None:
    box = Box()
    box.cfg = Config(torch.ones(2), {"a": torch.zeros(3)})
    findings = autoreg.find_unregistered(box)
    assert [f.path for f in findings] == ["cfg.scale", "cfg.table['a']"]
    assert findings[0].tensor is box.cfg.scale
    assert findings[0].fix == (
        "a tensor inside a Config object, which .to() never reaches: keep it on the module "
        "instead (a buffer, or an attribute of an autoreg.Module), and read it from there"
    )


def test_the_class_of_an_autoreg_module_does_not_move_what_its_objects_hold() -> None:
    """autoreg carries containers, not objects: the contract's row 12, what nn.Module does."""
    box = AutoBox()
    box.cfg = Config(torch.ones(2), {})
    assert [f.path for f in autoreg.find_unregistered(box)] == ["cfg.scale"]
    box.double()
    assert box.cfg.scale.dtype == torch.float32


def test_a_numpy_array_is_reported_with_its_dtype_and_a_fix() -> None:
    """The fix keeps a schedule forward reads as numbers (DINO's teacher temperatures) a numpy
    array: as a buffer, .half() and .to(torch.bfloat16) would round it (0.04 to 0.0400390625)."""
    box = Box()
    box.window = np.hanning(4)
    box.pair = [np.zeros(2, dtype=np.float32)]
    findings = autoreg.find_unregistered(box)
    assert [(f.path, f.dtype, f.shape) for f in findings] == [
        ("window", torch.float64, (4,)),
        ("pair[0]", torch.float32, (2,)),
    ]
    assert findings[0].fix == (
        "a numpy array, which .to() never moves: if forward computes with the array, make it a "
        "tensor (torch.as_tensor) kept as a buffer, and use that; if forward only takes numbers "
        "out of it (a schedule read per step, which a buffer's .half() would round) or never "
        "reads it (statistics kept for reference), leave it"
    )


class Sized(nn.Module):
    """StyleGAN3's layers keep their sizes as integer numpy arrays and read them as numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.size = np.broadcast_to(np.asarray(4), [2])
        self.keep = np.array([True, False, True, True])
        self.order = np.arange(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, : int(self.size[0])][:, self.keep] + torch.as_tensor(self.order)


def test_an_integer_or_boolean_numpy_array_is_no_finding_and_a_tensor_made_of_it_is() -> None:
    """Before: StyleGAN3's integer size arrays were eleven findings (and kept ``fix`` at exit 1
    with nothing to change). ``.to(dtype)`` has nothing to convert in an integer or boolean array,
    and what would stay behind is a tensor forward makes of it: the forward audit reports that
    one, where it is made."""
    model = Sized()
    assert autoreg.find_unregistered(model) == []
    model.window = np.hanning(4)  # floating: a table forward may compute with (rlkit's means)
    assert [f.path for f in autoreg.find_unregistered(model)] == ["window"]
    stray = autoreg.audit_forward(model, torch.ones(2, 8))
    assert [(s.kind, s.source) for s in stray] == [
        ("device", "return x[:, : int(self.size[0])][:, self.keep] + torch.as_tensor(self.order)")
    ]


class Guarded:
    """An object whose own code must never run: every attribute access through it fails."""

    calls = 0

    def __init__(self) -> None:
        object.__setattr__(self, "offsets", torch.ones(2))

    def __getattribute__(self, name: str) -> Any:
        type(self).calls += 1
        raise AssertionError("the audit ran the object's code")

    @property
    def computed(self) -> torch.Tensor:
        raise AssertionError("the audit ran a property")


def test_the_objects_own_code_never_runs() -> None:
    box = Box()
    box.__dict__["guarded"] = Guarded()  # nn.Module's __setattr__ would ask it for its class
    assert [f.path for f in autoreg.find_unregistered(box)] == ["guarded.offsets"]
    assert Guarded.calls == 0


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(lambda: torch.ones(2), id="a-function"),
        pytest.param(torch.float32, id="a-dtype"),
        pytest.param(torch.device("cpu"), id="a-device"),
        pytest.param(np, id="a-python-module"),
        pytest.param(Config, id="a-class"),
    ],
)
def test_functions_classes_modules_and_torch_values_are_not_walked(value: object) -> None:
    box = Box()
    box.value = value
    assert autoreg.find_unregistered(box) == []


def test_a_private_attributes_object_is_a_frameworks_and_not_walked() -> None:
    box = Box()
    box._trainer = types.SimpleNamespace(metrics={"loss": torch.ones(())})
    assert autoreg.find_unregistered(box) == []


def test_an_object_held_twice_and_a_cycle_are_walked_once() -> None:
    box = Box()
    shared = types.SimpleNamespace(mean=torch.zeros(2))
    shared.me = shared
    box.first, box.second = shared, shared
    assert [f.path for f in autoreg.find_unregistered(box)] == ["first.mean"]


def test_an_object_inside_a_held_object_is_walked_too() -> None:
    """A distribution that wraps another keeps its tensors two objects in; a config, a config of
    its own. .to() reaches neither. main: only the outer object's own fields were read, and the
    prior's tensors were not listed (docs/real-code.md, problem B)."""
    box = Box()
    loc, scale = torch.zeros(2), torch.ones(2)
    box.prior = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(loc, scale), [torch.distributions.ExpTransform()]
    )
    box.cfg = types.SimpleNamespace(
        loss=types.SimpleNamespace(weights=types.SimpleNamespace(table=torch.ones(3)))
    )
    findings = autoreg.find_unregistered(box)
    assert [f.path for f in findings] == [
        "prior.base_dist.loc",
        "prior.base_dist.scale",
        "cfg.loss.weights.table",
    ]
    assert findings[0].tensor is loc
    assert (findings[0].class_name, findings[0].attribute) == ("Box", "prior")
    assert findings[0].fix.startswith("a tensor inside a TransformedDistribution object")


def test_a_distribution_is_read_in_its_private_fields_too() -> None:
    """A distribution keeps its tensors, and the distributions it wraps, in ``_`` fields:
    OneHotCategorical's in ``_categorical``, MixtureSameFamily's in ``_mixture_distribution``
    and ``_component_distribution``. Before: not walked (a private field), so neither was listed
    while Normal's ``loc`` beside them was; .to() reaches none of them."""
    from torch.distributions import Categorical, MixtureSameFamily, Normal, OneHotCategorical

    box = Box()
    probs, weights, loc = torch.full((4,), 0.25), torch.ones(4), torch.zeros(4)
    # validate_args=True: validation makes Categorical's lazy logits, whatever an earlier test
    # (or pyro) set as the default
    box.onehot = OneHotCategorical(probs, validate_args=True)
    box.mix = MixtureSameFamily(
        Categorical(weights, validate_args=True), Normal(loc, torch.ones(4)), validate_args=True
    )
    box.held = types.SimpleNamespace(prior=Normal(loc, torch.ones(4)))
    findings = autoreg.find_unregistered(box)
    paths = [f.path for f in findings]
    assert paths[:2] == ["onehot._categorical.probs", "onehot._categorical.logits"]
    assert findings[0].tensor is box.onehot.probs  # normalized from probs
    assert "mix._mixture_distribution.probs" in paths
    assert "mix._component_distribution.loc" in paths
    assert paths[-2:] == ["held.prior.loc", "held.prior.scale"]
    assert {(f.class_name, f.attribute) for f in findings} == {
        ("Box", "onehot"),
        ("Box", "mix"),
        ("Box", "held"),
    }
    assert findings[0].fix.startswith("a tensor inside a OneHotCategorical object")


def test_objects_are_walked_three_deep_each_once_and_never_into_private_fields() -> None:
    """The walk is bounded: three objects deep (the held object and two inside it), each object
    read once, a private field (a framework's) never entered, a module never walked as an
    object (its own tensors are the audit's, or .to()'s)."""
    box = Box()
    deepest = types.SimpleNamespace(table=torch.ones(1))
    third = types.SimpleNamespace(table=torch.ones(2), inner=deepest)
    second = types.SimpleNamespace(table=torch.ones(3), inner=third, _cache=deepest)
    second.back = second
    box.held = types.SimpleNamespace(inner=second, again=second, module=box, _private=deepest)
    assert [f.path for f in autoreg.find_unregistered(box)] == [
        "held.inner.table",
        "held.inner.inner.table",
    ]


class Scaled:
    """A callable object holding a tensor (a loss with class weights, a transform)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def test_objects_in_a_list_or_dict_and_in_an_objects_list_are_walked_too() -> None:
    """A list of priors, a dict of configs, a flow's list of transforms, a callable object: all
    stay where they are under ``.to()``. Before: none of them was read (the model passed)."""
    from torch.distributions import AffineTransform, Normal, TransformedDistribution

    box = Box()
    box.priors = [Normal(torch.zeros(2), torch.ones(2))]
    box.configs = {"a": Config(torch.ones(2), {})}
    box.flow = TransformedDistribution(
        Normal(torch.zeros(2), torch.ones(2)), [AffineTransform(torch.ones(2), torch.ones(2))]
    )
    box.loss = Scaled(torch.ones(3))
    assert [f.path for f in autoreg.find_unregistered(box)] == [
        "priors[0].loc",
        "priors[0].scale",
        "configs['a'].scale",
        "flow.transforms[0].loc",
        "flow.transforms[0].scale",
        "flow.base_dist.loc",
        "flow.base_dist.scale",
        "loss.weight",
    ]
    box.to("meta")  # what the audit says
    assert not box.priors[0].loc.is_meta
    assert not box.flow.transforms[0].loc.is_meta
    assert not box.loss.weight.is_meta


def test_the_objects_in_a_private_attributes_container_are_a_frameworks_and_not_walked() -> None:
    """FSDP2 keeps its state in a dict under ``__composable_api_state_key_...``: not the model's
    (before: its parameter groups' tensors were reported, three objects deep)."""
    box = Box()
    box._state = {"fsdp": types.SimpleNamespace(groups=[types.SimpleNamespace(t=torch.ones(1))])}
    box.public = [types.SimpleNamespace(_private=[types.SimpleNamespace(t=torch.ones(1))])]
    assert autoreg.find_unregistered(box) == []


class _Normalised(nn.Module):
    """Constants defined on the class body, as preprocessing code keeps them."""

    mean = np.array([0.5, 0.5], dtype=np.float32)
    stats = types.SimpleNamespace(std=torch.ones(2))
    scale = torch.ones(2)  # reported before too

    @staticmethod
    def helper(x: torch.Tensor) -> torch.Tensor:  # a descriptor on the class: code, not data
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - torch.as_tensor(self.mean)) / self.stats.std * self.scale


def test_a_numpy_array_or_an_object_defined_on_the_class_is_reported_once() -> None:
    """Before: a tensor defined on the class was reported, a numpy array or a plain object
    holding a tensor there was missed."""
    model = nn.Sequential(_Normalised(), _Normalised())
    findings = autoreg.find_unregistered(model)
    assert [(f.path, f.class_name, f.attribute, f.kind) for f in findings] == [
        ("0.mean", "_Normalised", "mean", "numpy"),
        ("0.stats.std", "_Normalised", "stats", "object"),
        ("0.scale", "_Normalised", "scale", "tensor"),
    ]
    hidden = _Normalised()
    hidden.mean = None  # an attribute of the instance hides the class's
    assert [f.path for f in autoreg.find_unregistered(hidden)] == ["stats.std", "scale"]
