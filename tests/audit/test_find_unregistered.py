"""find_unregistered: every reference to a tensor that .to() would leave behind, with where it is
and the fix."""

from __future__ import annotations

import collections
import pickle
import sys
import types
import warnings
from typing import Any, NamedTuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.utils import prune

import autoreg
from autoreg import NotAModuleError, _audit
from autoreg._audit import locate_unregistered
from autoreg._walk import iter_modules, iter_tensors
from tests.support import role


class Box(nn.Module):
    """A plain module that holds whatever the test puts on it."""


class AutoBox(autoreg.Module):
    """An autoreg module that holds whatever the test puts on it (after construction: carried)."""


class Pair(NamedTuple):
    first: Any
    second: Any


def paths(module: nn.Module) -> list[str]:
    return [finding.path for finding in autoreg.find_unregistered(module)]


# --- what is reported, and where --------------------------------------------------------------


def test_a_plain_tensor_attribute_is_reported_with_its_class_shape_dtype_device_and_fix() -> None:
    box = Box()
    box.mask = torch.ones(4, 4, dtype=torch.bool)
    [finding] = autoreg.find_unregistered(box)
    assert finding.path == "mask"
    assert finding.tensor is box.mask
    assert finding.class_name == "Box"
    assert finding.attribute == "mask"
    assert finding.shape == (4, 4)
    assert finding.dtype == torch.bool
    assert finding.device == torch.device("cpu")
    assert finding.requires_grad is False
    assert finding.fix == (
        "subclass autoreg.Module or register_buffer('mask', ..., persistent=False); "
        "third-party class: autoreg.register_tensors"
    )


def test_paths_are_dotted_from_the_audited_module() -> None:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(2, 2)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = Attention()

    model = Box()
    model.blocks = nn.ModuleList([Block(), Block()])
    assert paths(model) == ["blocks.0.attn.mask", "blocks.1.attn.mask"]
    assert [f.class_name for f in autoreg.find_unregistered(model)] == ["Attention", "Attention"]
    assert paths(model.blocks[1]) == ["attn.mask"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([torch.ones(1), 3, torch.ones(1)], ["anchors[0]", "anchors[2]"]),
        ((torch.ones(1), torch.ones(1)), ["anchors[0]", "anchors[1]"]),
        ({"k": torch.ones(1), "v": torch.ones(1)}, ["anchors['k']", "anchors['v']"]),
        (collections.OrderedDict(k=torch.ones(1)), ["anchors['k']"]),
        (Pair(torch.ones(1), [torch.ones(1)]), ["anchors[0]", "anchors[1][0]"]),
        (
            {"k": [torch.ones(1), {"deep": (torch.ones(1),)}]},
            ["anchors['k'][0]", "anchors['k'][1]['deep'][0]"],
        ),
        ({1: torch.ones(1)}, ["anchors[1]"]),
        ([], []),
    ],
    ids=["list", "tuple", "dict", "OrderedDict", "namedtuple", "nested", "int-key", "empty"],
)
def test_tensors_in_containers_are_reported_with_python_indexing(
    value: object, expected: list[str]
) -> None:
    box = Box()
    box.head = Box()
    box.head.anchors = value
    assert paths(box) == [f"head.{path}" for path in expected]


def test_a_tensor_is_reported_at_each_attribute_that_holds_it_at_its_first_path_there() -> None:
    # .to() leaves each reference: fixing one attribute leaves the others behind.
    shared = torch.ones(1)
    box = Box()
    box.a = shared
    box.b = [shared, {"again": shared}]
    box.child = Box()
    box.child.c = shared
    assert paths(box) == ["a", "b[0]", "child.c"]


class Encoder(nn.Module):
    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.mask = mask


class Decoder(nn.Module):
    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.mask = mask


class Shared(nn.Module):
    """Two classes given one mask (a causal mask made once, handed to every block)."""

    def __init__(self) -> None:
        super().__init__()
        mask = torch.ones(2, 2)
        self.encoder, self.decoder = Encoder(mask), Decoder(mask)


def test_a_tensor_two_classes_share_is_reported_in_each_class() -> None:
    findings = autoreg.find_unregistered(Shared())
    assert [(f.path, f.class_name) for f in findings] == [
        ("encoder.mask", "Encoder"),
        ("decoder.mask", "Decoder"),
    ]


def test_one_class_fixed_the_reference_the_other_keeps_to_its_buffer_is_reported() -> None:
    # What fixing the first finding alone leaves: .to() gives the buffer a new tensor and leaves
    # the other class's reference on the CPU.
    model = Shared()
    mask = model.encoder.__dict__.pop("mask")
    model.encoder.register_buffer("mask", mask, persistent=False)
    assert paths(model) == ["decoder.mask"]
    model.to("meta")
    assert model.encoder.mask.is_meta
    assert model.decoder.mask.device.type == "cpu"


def test_a_shared_submodule_is_audited_once() -> None:
    inner = Box()
    inner.mask = torch.ones(1)
    box = Box()
    box.first, box.second = inner, inner
    assert paths(box) == ["first.mask"]


def test_a_cyclic_container_is_walked_once() -> None:
    cycle: list[Any] = [torch.ones(1)]
    cycle.append(cycle)
    box = Box()
    box.cycle = cycle
    assert paths(box) == ["cycle[0]"]


@pytest.mark.parametrize(
    ("value", "expected", "fix"),
    [
        (
            [nn.Linear(1, 1)],
            ["blocks[0].weight", "blocks[0].bias"],
            "nn.ModuleList: a module in a plain list",
        ),
        (
            {"bn": nn.BatchNorm1d(1, affine=False)},
            [
                "blocks['bn'].running_mean",
                "blocks['bn'].running_var",
                "blocks['bn'].num_batches_tracked",
            ],
            "nn.ModuleDict: a module in a plain dict",
        ),
    ],
    ids=["list", "dict"],
)
def test_modules_in_a_plain_container_are_reported_tensor_by_tensor(
    value: object, expected: list[str], fix: str
) -> None:
    box = AutoBox()
    box.blocks = value
    findings = autoreg.find_unregistered(box)
    assert [f.path for f in findings] == expected
    assert {f.class_name for f in findings} == {"AutoBox"}
    assert all(f.fix.startswith(fix) for f in findings)


def test_nothing_moves_in_a_module_held_in_a_plain_container() -> None:
    held = AutoBox()
    held.cache = torch.ones(1)  # carried, but .to() never reaches held
    box = Box()
    box.linear = nn.Linear(1, 1)
    box.items = [held, box.linear]  # box.linear is in the tree: it moves
    assert paths(box) == ["items[0].cache"]


# --- what is not reported ------------------------------------------------------------------------


def test_parameters_of_the_tree_are_not_findings_wherever_they_sit() -> None:
    # .to() converts a parameter in place (param.data), to a dtype or between the CPU and a
    # GPU: every reference follows it. (Not to meta: torch replaces the parameter there.)
    model = Box()
    model.linear = nn.Linear(2, 2)
    model.refs = [model.linear.weight, {"bias": model.linear.bias}]
    assert paths(model) == []
    model.to(torch.float64)
    assert model.refs[0].dtype == model.refs[1]["bias"].dtype == torch.float64


def test_a_buffer_referenced_under_another_name_is_a_finding_there() -> None:
    # .to() replaces a buffer in its module's _buffers: every other reference stays behind.
    model = Box()
    model.linear = nn.Linear(2, 2)
    model.register_buffer("table", torch.ones(3))
    model.linear.register_buffer("scale", torch.ones(1))
    model.refs = [{"table": model.table}, (model.linear.scale,)]
    model.alias = model.table
    assert paths(model) == ["refs[0]['table']", "refs[1][0]", "alias"]
    model.to("meta")
    assert model.table.is_meta
    assert model.linear.scale.is_meta
    assert model.alias.device.type == "cpu"
    assert model.refs[1][0].device.type == "cpu"


def test_an_autoreg_module_carries_its_reference_to_a_buffer() -> None:
    model = AutoBox()
    model.register_buffer("table", torch.ones(3))
    model.alias = model.table  # after construction: carried, as that buffer
    assert paths(model) == []
    model.to("meta")
    assert model.alias is model.table
    assert model.alias.is_meta


def test_parameters_torch_overwrites_leave_their_references_behind() -> None:
    model = Box()
    model.linear = nn.Linear(2, 2)
    model.refs = [model.linear.weight]
    overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        assert paths(model) == ["refs[0]"]
        model.to(torch.float64)
        assert model.linear.weight.dtype == torch.float64
        assert model.refs[0].dtype == torch.float32
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(overwrite)


@pytest.mark.parametrize(
    "factory",
    [
        lambda: nn.Linear(3, 4),
        lambda: nn.LSTM(3, 4, num_layers=2),
        lambda: nn.MultiheadAttention(4, 2),
        lambda: nn.BatchNorm2d(3),
        lambda: nn.Embedding(5, 2),
        lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16),
    ],
    ids=["Linear", "LSTM", "MultiheadAttention", "BatchNorm2d", "Embedding", "TransformerLayer"],
)
def test_pytorch_modules_are_clean(factory: Any) -> None:
    assert paths(factory()) == []


def test_an_autoreg_modules_buffers_carried_tensors_and_containers_are_not_findings() -> None:
    class Model(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(2)  # a buffer
            self.table = [torch.ones(1), {"k": torch.ones(1)}]  # a carried container

    model = Model()
    model.cache = torch.zeros(3)  # carried: a runtime tensor
    model.history = (torch.zeros(1),)
    assert {name: role(model, name) for name in ("mask", "table", "cache", "history")} == {
        "mask": "non-persistent buffer",
        "table": "carried",
        "cache": "carried",
        "history": "carried",
    }
    assert paths(model) == []


def test_tensors_that_require_grad_in_a_carried_container_are_findings() -> None:
    box = AutoBox()
    weight = torch.ones(2, requires_grad=True)
    box.items = [torch.ones(1), weight]
    [finding] = autoreg.find_unregistered(box)
    assert (finding.path, finding.tensor) == ("items[1]", weight)
    assert finding.fix == "nn.ParameterList if these are weights to train; if not, .detach() them"


def test_names_declared_plain_are_kept_in_place_on_purpose_and_not_reported() -> None:
    class Model(autoreg.Module):
        pinned: autoreg.Plain
        pinned_list: autoreg.Plain

        def __init__(self) -> None:
            super().__init__()
            self.pinned = torch.ones(1)
            self.pinned_list = [torch.ones(1)]

    assert paths(Model()) == []


def test_internal_attributes_are_skipped() -> None:
    box = Box()
    box.__dict__["_autoreg_scratch"] = torch.ones(1)
    box.__dict__["training"] = torch.ones(1)
    assert paths(box) == []


@pytest.mark.parametrize(
    "apply",
    [
        lambda m: prune.l1_unstructured(m, "weight", amount=0.5),
        lambda m: nn.utils.spectral_norm(m),
        lambda m: nn.utils.weight_norm(m),
    ],
    ids=["prune", "spectral_norm", "weight_norm"],
)
@pytest.mark.parametrize("after_forward", [False, True], ids=["built", "after-forward"])
def test_a_weight_recomputed_by_a_forward_pre_hook_is_not_a_finding(
    apply: Any, after_forward: bool
) -> None:
    linear = nn.Linear(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # weight_norm is deprecated
        apply(linear)
    if after_forward:
        linear(torch.ones(1, 3))
    assert "weight" in vars(linear)
    assert paths(linear) == []


@pytest.mark.parametrize("after_forward", [False, True], ids=["built", "after-forward"])
def test_a_recomputed_weight_held_elsewhere_by_its_module_is_not_a_finding(
    after_forward: bool,
) -> None:
    """weight_norm on an LSTM: ``RNNBase.__setattr__`` puts the recomputed weight in
    ``_flat_weights`` too, where the next forward replaces it as well. Before: reported there as
    an autograd result to detach (in both audits)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # weight_norm is deprecated
        lstm = nn.utils.weight_norm(nn.LSTM(3, 4), "weight_hh_l0")
    if after_forward:
        lstm(torch.randn(2, 1, 3))
    assert any(t is lstm.weight_hh_l0 for t in lstm._flat_weights)  # guard: held there too
    assert paths(lstm) == []
    assert autoreg.audit_forward(lstm, torch.randn(2, 1, 3), low_precision=None) == []


# --- tensors that require grad, and the fixes ----------------------------------------------------


def test_a_leaf_that_requires_grad_is_reported_as_a_parameter_to_be() -> None:
    box = Box()
    box.temperature = torch.ones((), requires_grad=True)
    [finding] = autoreg.find_unregistered(box)
    assert finding.requires_grad is True
    assert finding.fix.startswith("nn.Parameter(...) if it is a weight to train")


def test_an_autograd_result_is_reported_and_said_to_be_one() -> None:
    box = Box()
    box.activation = torch.ones(2, requires_grad=True) * 2
    box.activations = [box.activation * 3]
    findings = autoreg.find_unregistered(box)
    assert [f.path for f in findings] == ["activation", "activations[0]"]
    for finding in findings:
        assert finding.fix.startswith("an autograd result (e.g. an activation kept from forward)")


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        (
            [torch.ones(1)],
            "autoreg.BufferList(...), or subclass autoreg.Module (it carries the list)",
        ),
        (
            (torch.ones(1),),
            "autoreg.BufferList(...), or subclass autoreg.Module (it carries the tuple)",
        ),
        (
            {"k": torch.ones(1)},
            "autoreg.BufferDict(...), or subclass autoreg.Module (it carries the dict)",
        ),
        (
            {"k": [torch.ones(1)]},
            "subclass autoreg.Module (it carries nested containers), or one buffer per tensor",
        ),
        (
            {"k": nn.Parameter(torch.ones(1))},
            "nn.ParameterDict if these are weights to train; if not, .detach() them",
        ),
    ],
    ids=["list", "tuple", "dict", "nested", "parameters"],
)
def test_the_fix_for_a_container_names_the_container_to_use(value: object, fix: str) -> None:
    box = Box()
    box.items = value
    [finding] = autoreg.find_unregistered(box)
    assert finding.fix == fix


def test_a_name_hidden_by_a_class_attribute_gets_a_rename_fix() -> None:
    class Legacy(nn.Module):
        scale = None  # a class-level default

        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(1)

    [finding] = autoreg.find_unregistered(Legacy())
    assert finding.fix == (
        "'scale' is defined on the class (a class-level NoneType) and hides any buffer of that "
        "name: rename the attribute, or move the class-level value into __init__"
    )


def test_a_tensor_stored_around_setattr_on_an_autoreg_module_is_a_finding() -> None:
    """autoreg acts on assignments: a tensor put into ``__dict__`` directly stays where it is, as
    on nn.Module, and the audit says so, with the fix that makes it an assignment."""
    box = AutoBox()
    box.__dict__["mask"] = torch.ones(1)  # put around __setattr__
    [finding] = autoreg.find_unregistered(box)
    assert finding.path == "mask"
    assert finding.fix == (
        "stored around __setattr__ (a __dict__ write), which autoreg never sees: assign it, "
        "self.mask = ..., and autoreg registers or carries it"
    )
    assert box.double().mask.dtype == torch.float32  # what the finding says


def test_a_frameworks_tensor_on_an_autoreg_module_gets_a_framework_fix() -> None:
    class Framework(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stats = torch.ones(1)  # the framework's own: nn.Module's rules (row 4)

    class Model(autoreg.AutoRegisterMixin, Framework):
        pass

    [finding] = autoreg.find_unregistered(Model())
    assert (
        finding.fix == "kept by the code of a base class without autoreg (nn.Module's rules, row "
        "4): convert it where it is used, or assign it from Model's own code"
    )


def test_a_parameter_stored_around_setattr_gets_a_register_parameter_fix() -> None:
    box = Box()
    box.__dict__["weight"] = nn.Parameter(torch.ones(1))
    [finding] = autoreg.find_unregistered(box)
    assert finding.fix.startswith("register_parameter('weight', ...)")


# --- the Finding itself ----------------------------------------------------------------------


def test_a_finding_is_frozen_and_reads_well() -> None:
    box = Box()
    box.mask = torch.ones(2)
    [finding] = autoreg.find_unregistered(box)
    with pytest.raises(AttributeError):
        finding.path = "other"  # type: ignore[misc]
    assert repr(finding).startswith(
        "Finding(path='mask', class_name='Box', "
        "tensor=Tensor(shape=(2,), dtype=torch.float32, device='cpu'), fix="
    )
    assert finding.as_dict() == {
        "path": "mask",
        "kind": "tensor",
        "class": "Box",
        "attribute": "mask",
        "shape": [2],
        "dtype": "float32",
        "device": "cpu",
        "requires_grad": False,
        "fix": finding.fix,
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (3, r"^find_unregistered\(\) takes an nn.Module instance, got 'int'.$"),
        (
            Box,
            r"got the class Box.\nPass an instance, not the class: find_unregistered\(Box\(...\)\)",
        ),
    ],
    ids=["int", "class"],
)
def test_something_other_than_a_module_is_refused(value: object, message: str) -> None:
    with pytest.raises(NotAModuleError, match=message) as caught:
        autoreg.find_unregistered(value)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, autoreg.AutoRegisterError)


def test_a_torchscript_module_is_refused_not_reported_clean() -> None:
    """Its plain tensor attributes live in TorchScript (scripted: read through ``_c``; traced:
    constants of the graph): before, the audits found nothing, and ``.to()`` left ``mask``
    behind."""

    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.mask = torch.ones(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * self.mask

    with warnings.catch_warnings():  # torch.jit is deprecated from torch 2.13 on
        warnings.simplefilter("ignore")
        scripted = torch.jit.trace(Masked(), torch.ones(1, 2))
    message = r"^find_unregistered\(\) got a TorchScript module \(TopLevelTracedModule, "
    with pytest.raises(NotAModuleError, match=message):
        autoreg.find_unregistered(scripted)
    with pytest.raises(NotAModuleError, match=r"^audit_forward\(\) got a TorchScript module"):
        autoreg.audit_forward(scripted, torch.ones(1, 2))


# --- the audit agrees with .to() -----------------------------------------------------------------


@st.composite
def module_trees(draw: st.DrawFn) -> tuple[nn.Module, set[int]]:
    """A random tree of plain and autoreg modules holding shared tensors in every way there is.

    Returns the root and the ids of its parameters (never findings: converted in place).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)  # grad leaves on AutoBox
        return _build_tree(draw)


def _build_tree(draw: st.DrawFn) -> tuple[nn.Module, set[int]]:
    pool: list[torch.Tensor] = []
    for kind in draw(st.lists(st.sampled_from(["plain", "int", "grad", "result"]), min_size=1)):
        base = torch.ones(2, dtype=torch.int64 if kind == "int" else torch.float32)
        if kind in ("grad", "result"):
            base.requires_grad_()
        pool.append(base * 2 if kind == "result" else base)
    tensors = st.sampled_from(pool)
    containers = st.recursive(
        tensors,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
        ),
        max_leaves=6,
    )
    modules: list[nn.Module] = []
    for index in range(draw(st.integers(1, 4))):
        module = draw(st.sampled_from([Box, AutoBox]))()
        if modules:
            parent = draw(st.sampled_from(modules))
            setattr(parent, f"child{index}", module)
        modules.append(module)
        for slot in range(draw(st.integers(0, 4))):
            what = draw(st.sampled_from(["value", "buffer", "parameter", "reference", "orphan"]))
            name = f"a{slot}"
            if what == "value":
                setattr(module, name, draw(containers))
            elif what == "buffer":
                module.register_buffer(name, draw(tensors).detach().clone())
            elif what == "parameter":
                module.register_parameter(name, nn.Parameter(torch.ones(1)))
            elif what == "orphan":  # a module in a plain list: .to() never reaches it
                orphan = draw(st.sampled_from([Box, AutoBox]))()
                orphan.register_buffer("b", torch.ones(1))
                orphan.value = draw(containers)
                setattr(module, name, [orphan])
            else:  # a container holding a parameter or buffer of some module
                registered = [t for m in modules for t in (*m.parameters(), *m.buffers())]
                if registered:
                    setattr(module, name, [draw(st.sampled_from(registered)), draw(tensors)])
    root = modules[0]
    return root, {id(t) for t in root.parameters()}


@settings(max_examples=80, deadline=None)
@given(module_trees())
def test_findings_are_exactly_the_tensors_that_to_leaves_behind(
    tree: tuple[nn.Module, set[int]],
) -> None:
    # Each attribute that still holds a CPU tensor after .to("meta") is a finding, with that
    # tensor; a module held in a container leaves its parameters and buffers behind, found at the
    # container's attribute, and its own attributes, found at it.
    root, parameters = tree
    reported = {
        (id(entry.holder), entry.finding.attribute, id(entry.finding.tensor))
        for entry in locate_unregistered(root)
    }
    # A reference to a parameter of the tree follows it: .to() converts it in place, to a dtype or
    # a GPU (to meta, torch replaces it: the one move where such a reference stays).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)
        root.to("meta")
    left_behind: set[tuple[int, str, int]] = set()
    reached = list(root.modules())
    walked: list[nn.Module] = []
    for module in reached:
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            for _, tensor in iter_tensors(value):
                if tensor.device.type == "cpu" and id(tensor) not in parameters:
                    left_behind.add((id(module), name, id(tensor)))
            for _, held in iter_modules(value):
                if held in reached or held in walked:
                    continue
                walked.append(held)
                for tensor in (*held.parameters(), *held.buffers()):
                    if id(tensor) not in parameters:  # a parameter of the tree: it moved
                        left_behind.add((id(module), name, id(tensor)))
                for below in held.modules():
                    for attribute, item in vars(below).items():
                        if not attribute.startswith("_"):
                            for _, tensor in iter_tensors(item):
                                if id(tensor) not in parameters:
                                    left_behind.add((id(below), attribute, id(tensor)))
    assert reported == left_behind


# --- records left by old pickles, and per-device caches ------------------------------------------


class Reverted(autoreg.Module):
    """Pickled while it is an autoreg class; unpickled after it went back to nn.Module."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)


class RevertedToNNModule(nn.Module):
    """``Reverted``, after the class went back to ``nn.Module``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)


def test_a_record_left_by_an_old_pickle_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance keeps autoreg's record of what it carried, but nothing carries it any more."""
    module = Reverted()
    module.last = torch.ones(2)  # carried while the class is autoreg's
    module.history = [torch.zeros(2)]
    assert paths(module) == []
    data = pickle.dumps(module)
    monkeypatch.setattr(sys.modules[__name__], "Reverted", RevertedToNNModule)

    loaded = pickle.loads(data)

    assert type(loaded) is RevertedToNNModule
    assert paths(loaded) == ["last", "history[0]"]  # main: [] (the stale record was trusted)
    loaded.double()
    assert loaded.last.dtype == loaded.history[0].dtype == torch.float32  # they did stay behind
    assert autoreg.register_tensors(loaded) == ["last"]  # the stale record does not stop it


class DeviceCache(nn.Module):
    """Caches a tensor derived from its weight per device in forward, as timm's levit does."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))
        self.cache: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = self.weight.detach() * 2
        return x * self.cache[key]


class EmptiedDeviceCache(DeviceCache):
    """Empties its per-device cache in _apply, as timm's levit and efficientformerv2 do."""

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.cache = {}
        return super()._apply(fn, recurse)


def test_a_per_device_cache_that_apply_empties_is_not_a_finding() -> None:
    module = EmptiedDeviceCache()
    module(torch.ones(3))
    assert list(module.cache) == ["cpu"]

    assert paths(module) == []
    module.double()  # why: .to() leaves nothing behind, the model refills the cache
    assert module.cache == {}
    assert module(torch.ones(3, dtype=torch.float64)).dtype == torch.float64
    assert module.cache["cpu"].dtype == torch.float64


def test_a_per_device_cache_that_apply_keeps_is_a_finding_with_its_fix() -> None:
    module = DeviceCache()
    module(torch.ones(3))

    [finding] = autoreg.find_unregistered(module)

    assert finding.path == "cache['cpu']"
    assert finding.fix == (
        "a per-device cache: .to(dtype) leaves its entries in their old dtype and the model reads "
        "them; empty it in DeviceCache._apply (as timm's levit does), or do not cache"
    )
    module.double()  # why: the float32 entry stays, and forward reads it
    assert module.cache["cpu"].dtype == torch.float32


class KeptDeviceCache(DeviceCache):
    """An ``_apply`` of its own that converts another attribute, and keeps the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(3)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        super()._apply(fn, recurse)
        self.scale = fn(self.scale)
        return self


def test_a_per_device_cache_that_an_own_apply_keeps_is_a_finding() -> None:
    """Before: any ``_apply`` of the class's own was taken to empty the cache: not reported."""
    module = KeptDeviceCache()
    module(torch.ones(3))
    assert paths(module) == ["cache['cpu']"]
    module.double()  # why: its _apply converts scale, and leaves the cache as it is
    assert module.cache["cpu"].dtype == torch.float32


class LoggedApply(DeviceCache):
    """An ``_apply`` of its own that converts nothing more than nn.Module's."""

    calls = 0

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        LoggedApply.calls += 1
        return super()._apply(fn, recurse)


@pytest.mark.parametrize(
    "cache",
    [{"k": torch.ones(1)}, {"cpu": torch.ones(1), "k": torch.ones(1)}, {0: torch.ones(1)}],
    ids=["name", "mixed", "index"],
)
def test_a_dict_not_keyed_by_device_names_is_a_finding_even_if_apply_is_overridden(
    cache: dict[Any, torch.Tensor],
) -> None:
    """An ``_apply`` of the class's own that leaves the dict as it is: its entries stay behind.
    (One that empties the dict, as ``EmptiedDeviceCache``'s does, leaves nothing behind: what a
    class's own ``_apply`` moves is read from a converted copy.)"""
    module = LoggedApply()
    module.cache = cache

    assert len(autoreg.find_unregistered(module)) == len(cache)
    module.to("meta")
    assert all(not tensor.is_meta for tensor in module.cache.values())  # they stayed


# --- complex tensors: a buffer would lose its imaginary part -------------------------------------


@pytest.mark.parametrize(
    "holds",
    [pytest.param(lambda t: t, id="attribute"), pytest.param(lambda t: [t], id="in-a-list")],
)
def test_a_complex_tensor_is_never_told_to_become_a_buffer(holds: Any) -> None:
    """nn.Module's .to(dtype) casts a complex buffer to the real dtype given, dropping its
    imaginary part: the fix must not lead there (a rotary table, freqs_cis)."""
    table = torch.polar(torch.ones(4), torch.arange(4.0))
    box = Box()
    box.freqs_cis = holds(table)
    [finding] = autoreg.find_unregistered(box)
    assert finding.fix == (
        "a complex tensor: as a buffer, .to(dtype) would cast it to a real dtype and drop its "
        "imaginary part (nn.Module's rule); subclass autoreg.Module (it carries it, kept "
        "complex), or keep it a plain attribute and move it where it is used: .to(x.device)"
    )
    buffered = Box()
    buffered.register_buffer("freqs_cis", table.clone())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Casting complex values to real ..."
        buffered.to(torch.bfloat16)
    assert not buffered.freqs_cis.is_complex()  # the reason: nn.Module's rule, as measured


class Rotary(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.freqs_cis = torch.polar(torch.ones(4), torch.arange(4.0))


def test_the_complex_fix_autoreg_module_keeps_the_table_complex_and_leaves_nothing() -> None:
    """What the complex fix's first half promises (the base style of autoreg fix relies on it)."""
    rotary = Rotary()
    assert autoreg.find_unregistered(rotary) == []
    assert "freqs_cis" not in dict(rotary.named_buffers())
    table = rotary.freqs_cis.clone()
    rotary.to(torch.bfloat16)
    assert rotary.freqs_cis.dtype == torch.complex64
    assert torch.equal(rotary.freqs_cis, table)
    rotary.to("meta")
    assert rotary.freqs_cis.device.type == "meta"


# --- a class with its own to() ------------------------------------------------------------------


class MovesItself(nn.Module):
    """soft actor-critic's policies: a to(self, device) of its own moves the plain tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(2)

    def to(self, device):  # type: ignore[no-untyped-def, override]
        self.scale = self.scale.to(device)
        return super().to(device)


class MovesItselfChild(MovesItself):
    """The override is inherited: the class that defines it is named."""


class MovesItselfNamedAfterTorch(MovesItself):
    """The user's code under a ``__module__`` in torch's package (numpy-style public paths)."""

    __module__ = "torch.nn.policy"

    def to(self, device):  # type: ignore[no-untyped-def, override]
        return super().to(device)


@pytest.mark.parametrize(
    ("cls", "owner"),
    [
        pytest.param(MovesItself, "MovesItself", id="own"),
        pytest.param(MovesItselfChild, "MovesItself", id="inherited"),
        # before: taken for torch's by its __module__, and its to() not named
        pytest.param(MovesItselfNamedAfterTorch, "MovesItselfNamedAfterTorch", id="torch-named"),
    ],
)
def test_a_class_with_its_own_to_is_told_that_only_that_to_may_move_the_tensor(
    cls: type[nn.Module], owner: str
) -> None:
    """Its own to() may move the tensor (``policy.to(device)``); .cuda(), .double() and a parent's
    .to() never call it: still a finding, with where that to() is."""
    model = cls()
    [finding] = autoreg.find_unregistered(model)
    line = vars(sys.modules[__name__])[owner].to.__code__.co_firstlineno
    assert finding.fix.endswith(
        f"; {owner}'s own to() (tests/audit/test_find_unregistered.py:{line}) may move it, but "
        ".cuda(), .double() and a parent's .to() do not"
    )
    nn.Sequential(model).double()  # what the finding says: a parent's .to() leaves it
    assert model.scale.dtype == torch.float32


def test_torchs_and_installed_frameworks_to_is_not_the_models_own() -> None:
    """nn.Module's to(), and a to() of an installed package (Lightning's, transformers'), say
    nothing more than the finding: they move no plain tensor."""
    box = Box()
    box.scale = torch.ones(2)
    [finding] = autoreg.find_unregistered(box)
    assert "own to()" not in finding.fix
    from autoreg._audit_scope import own_method

    assert own_method(Box, ("to",)) is None
    installed = type("Installed", (nn.Module,), {"to": given})  # code of an installed package
    assert own_method(installed, ("to",)) is None


def test_a_kept_view_of_a_parameter_says_so_in_its_fix() -> None:
    # A view taken once (a transpose, a complex view of a real parameter kept as a step's cache):
    # .to() converts the parameter in place and leaves the view on the old values. Before, the
    # fix told to make it an nn.Parameter (a leaf that requires grad: "a weight to train").
    model = Box()
    model.linear = nn.Linear(2, 2)
    model.transposed = model.linear.weight.t()
    with torch.no_grad():
        model.cache = {"w": torch.view_as_complex(model.linear.weight)}
    findings = autoreg.find_unregistered(model)
    assert [f.path for f in findings] == ["transposed", "cache['w']"]
    for finding in findings:
        assert finding.fix.startswith("a view of the parameter linear.weight, kept: ")
    model.to(torch.float64)
    assert model.transposed.dtype == torch.float32


# --- tensors defined on the class -----------------------------------------------------------------


class _Scaled(nn.Module):
    """A tensor defined in the class body: every instance reads it, and ``.to()`` converts only
    what an instance holds."""

    table = torch.linspace(0, 1, 3)
    sizes = (2, 3)  # a class-level container without tensors: nothing to report

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)


class _Shadowed(_Scaled):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(3))
        self.__dict__["table"] = torch.ones(3)  # the instance's own, which .to() leaves too


class _AutoScaled(autoreg.Module):
    anchors = [torch.ones(2), torch.zeros(2)]


def test_a_tensor_defined_on_the_class_is_reported_once_with_its_fix() -> None:
    """Before: never reported, though ``.double()`` leaves it (an instance reads it through the
    class)."""
    root = nn.Sequential(_Scaled(), _Scaled(), _AutoScaled())
    found = autoreg.find_unregistered(root)
    assert [(f.path, f.class_name, f.attribute) for f in found] == [
        ("0.table", "_Scaled", "table"),
        ("2.anchors[0]", "_AutoScaled", "anchors"),
        ("2.anchors[1]", "_AutoScaled", "anchors"),
    ]
    assert found[0].tensor is _Scaled.table
    assert found[0].fix == (
        "defined on the class _Scaled, which .to() never converts (it converts what each "
        "instance holds): assign it in __init__ instead (self.table = ... on autoreg.Module, or "
        "register_buffer('table', ..., persistent=False))"
    )
    root.double()
    assert root[1].table.dtype == torch.float32  # left behind, as reported


def test_a_container_defined_on_the_class_is_not_told_to_become_a_buffer() -> None:
    """``register_buffer`` refuses a list (before: the fix said to register it)."""
    [first, _] = autoreg.find_unregistered(_AutoScaled())
    assert first.fix == (
        "defined on the class _AutoScaled, which .to() never converts (it converts what each "
        "instance holds): assign it in __init__ instead (self.anchors = ... on autoreg.Module, "
        "which carries a list, or autoreg.BufferList / autoreg.BufferDict)"
    )


def test_a_class_tensor_the_instance_hides_is_not_what_it_reads() -> None:
    module = _Shadowed()
    assert paths(module) == ["table"]  # the instance's own plain attribute, with its own fix
    assert autoreg.find_unregistered(module)[0].tensor is not _Scaled.table


def test_a_class_tensor_under_a_name_declared_plain_is_kept_in_place_on_purpose() -> None:
    class Lookup(autoreg.Module):
        lookup: autoreg.Plain = torch.arange(3)

    assert paths(Lookup()) == []


def _moves_its_state(module: str) -> type[nn.Module]:
    """A class whose own ``_apply`` converts a plain attribute (as torchmetrics' ``Metric``
    converts its states), beside one it leaves; defined in ``module`` (``__module__``)."""

    class MovesItsState(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.state = torch.zeros(2)
            self.defaults = {"state": torch.zeros(2)}
            self.kept = torch.ones(2)

        def _apply(self, fn: Any, recurse: bool = True) -> nn.Module:
            super()._apply(fn, recurse)
            self.state = fn(self.state)
            self.defaults = {key: fn(value) for key, value in self.defaults.items()}
            return self

    MovesItsState.__module__ = module
    return MovesItsState


@pytest.mark.parametrize(
    "where", [__name__, "torch.nn.modules.custom"], ids=["own", "torch's path"]
)
def test_what_a_classs_own_apply_moves_is_not_a_finding(where: str) -> None:
    """Before: ``state`` and ``defaults['state']`` were reported, though ``.to()`` moves them;
    a class whose ``__module__`` names torch's package (numpy-style public paths) was taken for
    torch's by that name, and its ``_apply`` not asked."""
    module = nn.Sequential(_moves_its_state(where)())
    assert paths(module) == ["0.kept"]
    module.to("meta")
    assert module[0].state.is_meta  # what the audit said
    assert not module[0].kept.is_meta


def test_what_a_too_large_module_with_its_own_apply_moves_is_reported_with_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Too large to copy, the module's findings stand as read: every tensor, each fix saying that
    its class's own ``_apply`` may move it and why the audit could not tell (before: the same
    findings, as if nothing could move them)."""

    class Weighted(_moves_its_state(__name__)):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(4))

    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 3)
    module = nn.Sequential(Weighted(), nn.Linear(2, 2))
    findings = autoreg.find_unregistered(module)
    assert [f.path for f in findings] == ["0.state", "0.defaults['state']", "0.kept"]
    for finding in findings:
        assert "Weighted's own _apply() may move it: the audit could not tell" in finding.fix
        assert "more than 3 elements, too many to copy" in finding.fix
    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 1 << 22)
    assert paths(module) == ["0.kept"]  # guard: under the limit, what its _apply moves is read


def test_a_module_with_its_own_apply_that_cannot_be_copied_is_reported_with_why() -> None:
    class Uncopyable(_moves_its_state(__name__)):  # type: ignore[misc]
        def __deepcopy__(self, memo: dict[int, object]) -> None:
            raise RuntimeError("holds a file handle")

    findings = autoreg.find_unregistered(Uncopyable())
    assert [f.path for f in findings] == ["state", "defaults['state']", "kept"]
    assert all(
        "RuntimeError: holds a file handle" in f.fix and "own _apply() may move it" in f.fix
        for f in findings
    )


def test_torchs_own_apply_overrides_are_nn_modules_to_the_audit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``RNNBase._apply`` re-flattens weights and converts no plain tensor: a stray on a GRU
    subclass is reported with nn.Module's fix, however large the module, and no copy is made
    (before: too large to copy, its fix said the class's ``_apply`` might move it)."""

    class Encoder(nn.GRU):
        def __init__(self) -> None:
            super().__init__(4, 4)
            self.h0 = torch.zeros(1, 4)

    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 1)
    [finding] = autoreg.find_unregistered(Encoder())
    assert finding.path == "h0"
    assert "_apply" not in finding.fix


class _Table(nn.Module):
    """A plain module with two plain tensors and a plain object holding a third."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.ones(2)
        self.kept = torch.ones(2)
        self.config = types.SimpleNamespace(weights=torch.ones(2), other=torch.ones(2))


class _MovesItsChildsTable(nn.Module):
    """A parent whose own ``_apply`` converts what its child and the child's object hold (a
    wrapper that keeps a third-party layer's constants in step)."""

    def __init__(self) -> None:
        super().__init__()
        self.child = _Table()

    def _apply(self, fn: Any, recurse: bool = True) -> nn.Module:
        super()._apply(fn, recurse)
        self.child.table = fn(self.child.table)
        self.child.config.weights = fn(self.child.config.weights)
        return self


def test_what_a_parents_own_apply_moves_in_its_child_is_not_a_finding() -> None:
    """The parent's ``.to()`` moves ``child.table`` and the object's ``weights``: before, both
    were reported (only the module's own class's ``_apply`` was asked)."""
    model = nn.Sequential(_MovesItsChildsTable())
    assert paths(model) == ["0.child.kept", "0.child.config.other"]
    model.to("meta")
    child = model[0].child
    assert [child.table.is_meta, child.config.weights.is_meta] == [True, True]
    assert [child.kept.is_meta, child.config.other.is_meta] == [False, False]
    # The child audited alone: its own .to() moves none of them.
    alone = _MovesItsChildsTable().child
    assert paths(alone) == ["table", "kept", "config.weights", "config.other"]


def test_a_parents_own_apply_that_cannot_be_copied_says_so_at_its_childs_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 3)
    findings = autoreg.find_unregistered(_MovesItsChildsTable())
    assert [f.path for f in findings] == [
        "child.table", "child.kept", "child.config.weights", "child.config.other"
    ]  # fmt: skip
    for finding in findings:
        assert "_MovesItsChildsTable's own _apply() may move it" in finding.fix


def test_the_plain_tensors_of_a_module_with_its_own_apply_count_against_its_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy holds the module's plain tensors too (a metric's accumulated states can be its
    largest part): they count against the limit (before: parameters and buffers only, and a
    module holding none was copied whatever its states held)."""
    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 5)  # its states hold 2 + 2 + 2
    findings = autoreg.find_unregistered(_moves_its_state(__name__)())
    assert [f.path for f in findings] == ["state", "defaults['state']", "kept"]
    assert all("more than 5 elements, too many to copy" in f.fix for f in findings)
    monkeypatch.setattr(_audit, "_OWN_APPLY_COPY_LIMIT", 6)
    assert paths(_moves_its_state(__name__)()) == ["kept"]  # guard: copied at the limit


def test_an_alias_is_told_to_read_what_it_follows_not_to_become_a_buffer() -> None:
    """Registered on its own, an alias of a buffer, or a detached copy of a parameter that
    shares its storage, would be converted apart from it and miss its in-place updates (running
    statistics, optimizer steps). Before: the fix said to register it."""
    model = Box()
    model.linear = nn.Linear(2, 2)
    model.register_buffer("table", torch.ones(3))
    model.alias = model.table
    model.frozen = model.linear.weight.detach()
    alias, frozen = autoreg.find_unregistered(model)
    assert alias.fix == (
        "the same tensor as the buffer table: .to() gives table new values and leaves this one "
        "on the old (a buffer of its own would no longer follow table); read table where it is "
        "used"
    )
    assert frozen.fix == (
        "shares its storage with the parameter linear.weight: .to() gives linear.weight new "
        "values and leaves this one on the old (a buffer of its own would no longer follow "
        "linear.weight); read linear.weight where it is used"
    )
    model.double()  # what the fixes say
    assert model.alias.dtype == model.frozen.dtype == torch.float32


def test_plain_tensors_that_share_their_values_are_told_to_keep_one() -> None:
    """A view of another plain tensor, and one tensor two modules hold: as two buffers they
    would be converted apart (before: the fix said to register each)."""
    model = Box()
    model.store = torch.zeros(2, 3)
    model.first = model.store[0]
    model.child = Box()
    model.child.seen = model.store
    found = {f.path: f.fix for f in autoreg.find_unregistered(model)}
    assert found["first"].startswith(
        "shares its storage with store, which .to() leaves behind too: made two buffers (or "
        "carried apart), they would be converted apart and stop sharing their values"
    )
    assert found["child.seen"].startswith("the same tensor as store, which .to() leaves behind")
    assert found["store"].startswith("the same tensor as child.seen")


class _Stats(NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor


def test_a_named_tuple_is_not_told_to_become_a_buffer_list() -> None:
    """Forward reads it by field (``self.stats.mean``), which an ``autoreg.BufferList`` lacks.
    Before: "autoreg.BufferList(...), or subclass autoreg.Module (it carries the _Stats)"."""
    box = Box()
    box.stats = _Stats(torch.zeros(2), torch.ones(2))
    fixes = {f.fix for f in autoreg.find_unregistered(box)}
    assert fixes == {
        "subclass autoreg.Module (it carries the _Stats, fields and all), or one buffer per "
        "field, with the _Stats built where it is read (autoreg.BufferList would lose the field "
        "names)"
    }
