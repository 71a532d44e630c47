"""Row 6: tensors that require grad are neither registered nor carried."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune
from torch import nn

import autoreg


class Holder(autoreg.Module):
    def __init__(self, value: torch.Tensor | None = None) -> None:
        super().__init__()
        if value is not None:
            self.held = value


def test_an_autograd_result_is_a_plain_attribute_without_warning() -> None:
    weight = torch.ones(2, requires_grad=True)
    module = Holder(weight * 2)  # what prune, weight_norm or a stored activation write
    assert "held" in vars(module)
    assert dict(module.named_buffers()) == {}
    module.double()
    assert module.held.dtype == torch.float32  # as in nn.Module: not autoreg's to move


def test_a_leaf_that_requires_grad_warns_once_and_suggests_a_parameter() -> None:
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"self\.held = nn\.Parameter\(value\)"):
        Holder(torch.ones(2, requires_grad=True))
    # The same class and name again: silent (warnings are errors in this test suite).
    module = Holder(torch.ones(2, requires_grad=True))
    assert "held" in vars(module)
    assert dict(module.named_buffers()) == {}


def test_the_warning_names_class_attribute_and_tensor() -> None:
    class Weighted(autoreg.Module):
        pass

    module = Weighted()
    with pytest.warns(autoreg.AutoRegisterWarning) as record:
        module.scale = torch.ones(3, requires_grad=True)
    message = str(record[0].message)
    assert message.startswith(
        "Weighted.scale = Tensor(shape=(3,), dtype=torch.float32, device='cpu', "
        "requires_grad=True) is a leaf tensor that requires grad"
    )
    assert record[0].filename == __file__


def test_strict_raises_on_a_leaf_that_requires_grad() -> None:
    class Strict(autoreg.Module, strict=True):
        pass

    module = Strict()
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Strict\.w = .* is a leaf tensor"):
        module.w = torch.ones(1, requires_grad=True)
    assert not hasattr(module, "w")
    module.activation = torch.ones(1, requires_grad=True) * 2  # not a leaf: allowed
    assert "activation" in vars(module)


def test_plain_silences_the_warning() -> None:
    class Pinned(autoreg.Module):
        trainable: autoreg.Plain

    module = Pinned()
    module.trainable = torch.ones(1, requires_grad=True)  # no warning: it is declared plain
    assert "trainable" in vars(module)


def test_a_carried_name_that_receives_a_grad_tensor_is_no_longer_carried() -> None:
    module = autoreg.Module()
    module.state = torch.zeros(2)
    assert vars(module)["_autoreg_owned"] == {"state": "carried"}
    module.state = torch.zeros(2, requires_grad=True) * 1
    assert vars(module)["_autoreg_owned"] == {}
    module.double()
    assert module.state.dtype == torch.float32


def test_a_grad_tensor_assigned_to_a_buffer_stays_a_buffer_as_in_nn_module() -> None:
    class M(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(2)

    module = M()
    module.table = torch.ones(2, requires_grad=True) * 2
    assert "table" in module._buffers


@pytest.mark.parametrize(
    "apply",
    [
        pytest.param(
            lambda m: torch.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5), id="prune"
        ),
        pytest.param(
            lambda m: torch.nn.utils.weight_norm(m),
            id="weight_norm",
            marks=pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated"),
        ),
        pytest.param(lambda m: torch.nn.utils.spectral_norm(m), id="spectral_norm"),
    ],
)
def test_derived_weights_never_become_buffers(apply) -> None:
    class MyLinear(autoreg.AutoRegisterMixin, nn.Linear):
        pass

    torch.manual_seed(0)
    ours = MyLinear(3, 3)
    torch.manual_seed(0)
    theirs = nn.Linear(3, 3)
    for module in (ours, theirs):
        apply(module)
        module(torch.ones(1, 3))
        with torch.no_grad():
            module.eval()(torch.ones(1, 3))
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert dict(ours.named_buffers()).keys() == dict(theirs.named_buffers()).keys()
