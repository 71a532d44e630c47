"""Row 6: the weight prune / weight_norm / spectral_norm derive is established by identity.

Each of those utilities keeps a forward pre-hook on the module (a ``BasePruningMethod``, a
``WeightNorm``, a ``SpectralNorm``) that names the weight it recomputes, and the first weight is
written by its ``apply`` before that hook exists. autoreg asks the hooks, and for the first write,
which code makes the assignment; a parameter whose name ends in ``_orig`` (or ``_v`` and ``_g``)
beside the name decides nothing. Where it cannot tell (a compiled forward, where frames cannot be
read, and no hook yet), it does what nn.Module does, a plain attribute, and warn mode says so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.nn.utils import prune

import autoreg
from autoreg._contract import Concern, classify
from autoreg._enforce import enforce
from autoreg._facts import situation
from autoreg._record import record_of
from tests.support import role

OLD_WEIGHT_NORM = pytest.mark.filterwarnings(
    r"ignore:`torch\.nn\.utils\.weight_norm` is deprecated:FutureWarning"
)


class Embedding(autoreg.Module):
    """A table beside a parameter whose name is the table's plus ``_orig``: nothing derives it."""

    def __init__(self) -> None:
        super().__init__()
        self.pos_embed_orig = nn.Parameter(torch.zeros(4, 2))  # e.g. kept to interpolate from
        self.pos_embed = torch.randn(4, 2)  # a table built in __init__: a buffer (row 10)
        self.gain_v = nn.Parameter(torch.ones(2))
        self.gain_g = nn.Parameter(torch.ones(1))
        self.gain = torch.ones(2)  # weight_norm's shape of names, and no weight_norm


def test_a_table_beside_a_parameter_named_like_pruning_leaves_it_is_a_buffer() -> None:
    """main: ``pos_embed`` stayed a plain attribute that ``.double()`` leaves behind, silently,
    because a parameter ``pos_embed_orig`` exists."""
    module = Embedding()
    assert role(module, "pos_embed") == "non-persistent buffer"
    assert role(module, "gain") == "non-persistent buffer"
    module.double()
    assert module.pos_embed.dtype == module.gain.dtype == torch.float64


def test_a_runtime_tensor_beside_such_a_parameter_is_carried() -> None:
    module = Embedding()
    del module.pos_embed
    module.pos_embed = torch.randn(4, 2)  # at run time: carried (row 11)
    assert role(module, "pos_embed") == "carried"
    assert module.double().pos_embed.dtype == torch.float64


class AutoLinear(autoreg.AutoRegisterMixin, nn.Linear, persistent=True):
    """persistent=True: a derived weight registered by mistake would show in state_dict."""


class Logged(AutoLinear):
    """Overrides ``__setattr__`` to log, as models do: the utility's code is one frame further."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)


def _prune(module: nn.Module) -> None:
    prune.l1_unstructured(module, "weight", amount=0.5)


def _prune_twice(module: nn.Module) -> None:
    prune.random_unstructured(module, "weight", amount=0.3)
    prune.l1_unstructured(module, "weight", amount=0.3)  # a PruningContainer


class HalfMask(prune.BasePruningMethod):
    """A pruning method of one's own, as torch's tutorial writes one."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        mask = default_mask.clone()
        mask.view(-1)[::2] = 0
        return mask


def _custom(module: nn.Module) -> None:
    HalfMask.apply(module, "weight")


def _global(module: nn.Module) -> None:
    prune.global_unstructured([(module, "weight")], prune.L1Unstructured, amount=0.5)


def _old_weight_norm(module: nn.Module) -> None:
    torch.nn.utils.weight_norm(module)


def _old_spectral_norm(module: nn.Module) -> None:
    torch.nn.utils.spectral_norm(module)


UTILITIES = pytest.mark.parametrize(
    "utility",
    [
        _prune,
        _prune_twice,
        _custom,
        _global,
        pytest.param(_old_weight_norm, marks=OLD_WEIGHT_NORM),
        _old_spectral_norm,
    ],
    ids=["prune", "prune-twice", "own-method", "global", "weight_norm", "spectral_norm"],
)
BASES = pytest.mark.parametrize("base", [AutoLinear, Logged], ids=["mixin", "setattr-override"])


def _applied_in_init(base: type[nn.Linear], utility: Callable[[nn.Module], None]) -> nn.Linear:
    class Applied(base):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            super().__init__(4, 3)
            utility(self)

    return Applied()


@UTILITIES
@BASES
def test_a_derived_weight_written_under_no_grad_in_init_is_the_utilitys(
    utility: Callable[[nn.Module], None], base: type[nn.Linear]
) -> None:
    """Built under ``no_grad``, the derived weight does not require grad: nothing in the value
    says it is derived. main registered it as a buffer unless the class declared it Plain; the
    code that assigns it says whose it is."""
    with torch.no_grad():
        torch.manual_seed(0)
        auto = _applied_in_init(base, utility)
        torch.manual_seed(0)
        twin = _applied_in_init(nn.Linear, utility)
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert list(auto.state_dict()) == list(twin.state_dict())
    assert role(auto, "weight") == "plain"
    x = torch.randn(2, 4)
    torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)


@UTILITIES
@BASES
def test_a_derived_weight_is_the_utilitys_after_construction_and_in_every_forward(
    utility: Callable[[nn.Module], None], base: type[nn.Linear]
) -> None:
    torch.manual_seed(0)
    auto = base(4, 3)
    torch.manual_seed(0)
    twin = nn.Linear(4, 3)
    for module in (auto, twin):
        torch.manual_seed(1)  # random masks, spectral_norm's random start
        utility(module)
    x = torch.randn(2, 4)
    for _ in range(2):
        torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)
        with torch.no_grad():
            torch.testing.assert_close(auto.eval()(x), twin.eval()(x), rtol=0, atol=0)
        auto.train()
        twin.train()
        assert role(auto, "weight") == "plain"
        assert list(auto.state_dict()) == list(twin.state_dict())


def test_a_pruned_weight_in_a_compiled_forward_compiles_as_the_twins() -> None:
    """The hook names the weight: a compiled forward needs no frame to tell."""

    def frames(module: nn.Module) -> int:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(module, backend=counter, fullgraph=True)
        for _ in range(3):
            compiled(torch.ones(2, 4))
        return int(counter.frame_count)

    torch.manual_seed(0)
    auto = AutoLinear(4, 3)
    torch.manual_seed(0)
    twin = nn.Linear(4, 3)
    for module in (auto, twin):
        _prune(module)
    try:
        assert frames(auto) == frames(twin) == 1
    finally:
        torch._dynamo.reset()
    assert role(auto, "weight") == "plain"
    assert list(auto.state_dict()) == list(twin.state_dict())


def test_where_autoreg_cannot_tell_it_does_what_nn_module_does_and_warn_mode_says_so() -> None:
    """In compiled code (no frame to read) a tensor for ``name`` beside ``name_orig``, with no
    utility's hook naming it, may be the first weight a utility writes: row 6, nn.Module's plain
    attribute, with a concern that warn mode reports. Declared, the declaration decides."""

    class Gradual(autoreg.Module, warn=True):
        declared: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.pos_embed_orig = nn.Parameter(torch.zeros(2))
            self.declared_orig = nn.Parameter(torch.zeros(2))

    module = Gradual()
    record = record_of(module)
    d = vars(module)
    unsure = classify(record, situation(record, d, "pos_embed", torch.ones(2), None, module))
    assert (unsure.row, unsure.moves, unsure.concern) == (6, False, Concern.UNSURE_DERIVED)
    declared = classify(record, situation(record, d, "declared", torch.ones(2), None, module))
    assert declared.row == 9
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"cannot tell whether Gradual\.pos_embed"):
        enforce(module, record, "pos_embed", torch.ones(2), unsure)
