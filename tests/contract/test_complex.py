"""Complex tensors: moved with the module, never cast to a real dtype (issue 28, "Migration never
introduces a wrong result").

``nn.Module.to(dtype)`` casts a complex buffer to a real dtype and drops its imaginary part (a
UserWarning, no error), while a plain attribute is never touched. A complex rotary table
(``freqs_cis = torch.polar(...)``) kept plain by a model was made a buffer by autoreg, and
``.to(torch.bfloat16)`` then changed the model's output. The rule: a complex tensor autoreg
carries follows the device of ``.to()``, and a complex dtype, never a real one; one assigned while
the module is built is carried, not registered (row 10), so that nn.Module's buffer rule cannot
reach it. A name declared by an annotation, or registered by hand, is a buffer as in nn.Module.
Integer and bool tensors are the other kind ``.to(dtype)`` leaves alone: they stay as the
original model has them under every conversion ``.to()``, ``.half()`` and the like make;
``.type(dtype)``, which casts every buffer, casts them as it casts the twin's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role

# nn.Module.to(real dtype) casts the twin's complex buffer, and torch warns.
DROPS_IMAGINARY = pytest.mark.filterwarnings(
    "ignore:Casting complex values to real discards the imaginary part:UserWarning"
)
# nn.Module.to(complex dtype) warns that complex modules are experimental, for every model.
COMPLEX_MODULE = pytest.mark.filterwarnings(
    "ignore:Complex modules are a new feature under active development:UserWarning"
)


def _freqs_cis(dim: int, end: int) -> torch.Tensor:
    """The rotary table of LLM reference code: complex64, unit magnitude."""
    freqs = 1.0 / (10_000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angles = torch.outer(torch.arange(end, dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(angles), angles)


class Attention:
    """The model's body, written once: a projection and rotary embeddings in float32 complex,
    cast back with ``.type_as(x)`` (as LLM reference code does). No annotations: one would
    declare the name (row 9)."""

    def build(self) -> None:
        self.proj = nn.Linear(8, 8)
        self.freqs_cis = _freqs_cis(8, 16)  # a plain attribute in the original
        self.positions = torch.arange(16)  # integer: .to(dtype) leaves it
        self.causal = torch.ones(16, 16, dtype=torch.bool).tril()  # bool: likewise

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.proj(x)
        seq = x.shape[0]
        pairs = torch.view_as_complex(q.float().reshape(seq, -1, 2))
        rotated = torch.view_as_real(pairs * self.freqs_cis[self.positions[:seq]]).flatten(1)
        scores = (rotated @ rotated.T).masked_fill(~self.causal[:seq, :seq], float("-inf"))
        return (scores.softmax(-1) @ rotated).type_as(x)


class Original(Attention, nn.Module):
    """As written, before migrating: the table is a plain attribute nn.Module never moves."""

    def __init__(self) -> None:
        super().__init__()
        self.build()


class Migrated(Attention, autoreg.Module):
    """The one-line migration: the base class."""

    def __init__(self) -> None:
        super().__init__()
        self.build()


class Twin(Attention, nn.Module):
    """The hand-registered twin: the table a non-persistent buffer, cast by .to(real dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.build()
        for name in ("freqs_cis", "positions", "causal"):
            value = self.__dict__.pop(name)
            self.register_buffer(name, value, persistent=False)


def _built(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls()


@DROPS_IMAGINARY
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_to_a_real_dtype_gives_the_original_model_s_outputs(dtype: torch.dtype) -> None:
    """The issue's case: after .to(torch.bfloat16) the migrated model computes what the original
    computes (bitwise); the twin, whose table nn.Module cast to bfloat16, does not."""
    original, migrated, twin = (_built(cls).to(dtype) for cls in (Original, Migrated, Twin))
    x = torch.randn(5, 8, dtype=dtype)
    expected = original(x)
    assert torch.equal(migrated(x), expected)
    assert migrated.freqs_cis.dtype == torch.complex64
    assert twin.freqs_cis.dtype == dtype  # nn.Module's rule for a buffer: the values dropped
    assert not torch.equal(twin(x), expected)


def test_to_a_real_dtype_warns_nothing() -> None:
    """No cast that drops the imaginary part is made, so torch has nothing to warn about."""
    migrated = _built(Migrated)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        migrated.to(torch.bfloat16)
    assert migrated.freqs_cis.dtype == torch.complex64


def test_a_complex_tensor_built_in_init_is_carried_and_the_checkpoint_is_the_originals() -> None:
    migrated = _built(Migrated)
    assert role(migrated, "freqs_cis") == "carried"
    assert role(migrated, "positions") == "non-persistent buffer"
    assert "freqs_cis" not in dict(migrated.named_buffers())
    assert list(migrated.state_dict()) == list(_built(Original).state_dict())


MOVES: dict[str, tuple[Callable[[nn.Module], object], Any]] = {
    # name: (the move, the complex table's dtype after it: None for "as the twin's")
    "to(bfloat16)": (lambda m: m.to(torch.bfloat16), torch.complex64),
    "to(float64)": (lambda m: m.to(torch.float64), torch.complex64),
    "to(cpu, float16)": (lambda m: m.to("cpu", torch.float16), torch.complex64),
    "half": (lambda m: m.half(), None),
    "float": (lambda m: m.float(), None),
    "double": (lambda m: m.double(), None),
    "bfloat16": (lambda m: m.bfloat16(), None),
    "type(float64)": (lambda m: m.type(torch.float64), torch.complex64),
    "to(complex128)": (lambda m: m.to(torch.complex128), None),
    "to(meta)": (lambda m: m.to("meta"), None),
    "to(meta, bfloat16)": (lambda m: m.to("meta", torch.bfloat16), torch.complex64),
    "to_empty(meta)": (lambda m: m.to_empty(device="meta"), None),
    "channels_last": (lambda m: m.to(memory_format=torch.channels_last), None),
}


@DROPS_IMAGINARY
@COMPLEX_MODULE
@pytest.mark.parametrize(("move", "dtype"), MOVES.values(), ids=MOVES.keys())
def test_each_move_follows_the_twin_except_a_cast_to_a_real_dtype(
    move: Callable[[nn.Module], object], dtype: torch.dtype | None
) -> None:
    """The device always as the twin's buffer; the dtype as the twin's unless that is a real one
    (then the table keeps its own); the values, where there are any, the original's."""
    original, migrated, twin = _built(Original), _built(Migrated), _built(Twin)
    for model in (migrated, twin):
        move(model)
    table, twins = migrated.freqs_cis, twin.freqs_cis
    assert table.device == twins.device
    assert table.dtype == (dtype or twins.dtype)
    assert table.is_complex()
    for name in ("positions", "causal"):  # integer and bool: the twin's buffers
        assert getattr(migrated, name).dtype == getattr(twin, name).dtype
        if move is not MOVES["type(float64)"][0]:  # .type() casts every buffer, these included
            assert getattr(migrated, name).dtype == getattr(original, name).dtype
    if not table.is_meta:
        assert torch.equal(table, original.freqs_cis.to(table.dtype))


@DROPS_IMAGINARY
@pytest.mark.parametrize("when", ["construction", "runtime", "in a list"])
def test_every_complex_tensor_autoreg_carries_keeps_its_imaginary_part(when: str) -> None:
    class Holder(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)
            if when == "construction":
                self.z = torch.tensor([1 + 2j, -3j])

    model = Holder()
    if when == "runtime":
        model.z = torch.tensor([1 + 2j, -3j])
    elif when == "in a list":
        model.items = [torch.tensor([1 + 2j, -3j]), torch.ones(2)]
    model.to(torch.bfloat16)
    z = model.items[0] if when == "in a list" else model.z
    assert z.dtype == torch.complex64
    assert z.tolist() == [1 + 2j, -3j]
    if when == "in a list":
        assert model.items[1].dtype == torch.bfloat16


@DROPS_IMAGINARY
def test_a_persistent_class_carries_it_too_as_an_autograd_result() -> None:
    """Row 10's exception does not depend on persistence: nn.Module would cast the buffer all
    the same, and the original never saved the plain attribute."""

    class Saved(autoreg.Module, persistent=True):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(2)
            self.z = torch.tensor([1 + 2j])

    model = Saved()
    assert list(model.state_dict()) == ["table"]
    model.to(torch.float16)
    assert model.z.dtype == torch.complex64

    class Declared(Saved):  # what options.md says to write to save it
        z: autoreg.Persistent

    assert list(Declared().state_dict()) == ["table", "z"]


@DROPS_IMAGINARY
def test_a_declared_name_is_a_buffer_and_follows_nn_module() -> None:
    """An annotation declares a buffer (row 9): what nn.Module does with it, a cast included."""

    class Declared(autoreg.Module):
        z: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.z = torch.tensor([1 + 2j])

    model = Declared()
    assert role(model, "z") == "non-persistent buffer"
    model.to(torch.float16)
    assert model.z.dtype == torch.float16


def test_a_complex_tensor_assigned_before_nn_module_init_is_carried() -> None:
    class Early(autoreg.Module):
        def __init__(self) -> None:
            self.z = torch.tensor([1 + 2j])  # before nn.Module.__init__: nn.Module accepts it
            super().__init__()

    model = Early()
    assert role(model, "z") == "carried"
    model.to(torch.bfloat16)
    assert model.z.dtype == torch.complex64


def test_strict_mode_refuses_it_as_any_undeclared_tensor() -> None:
    """Undeclared, it is refused; the error says what autoreg would do with it."""

    class Strict(autoreg.Module, strict=True):
        def __init__(self) -> None:
            super().__init__()
            self.freqs_cis = _freqs_cis(4, 4)

    with pytest.raises(
        autoreg.UnregisteredTensorError,
        match=r"Without strict, autoreg would carry it: \.to\(\) moves it and keeps it complex",
    ):
        Strict()


def test_the_decision_is_row_10_carried() -> None:
    """The classification reads the complex dtype only while the module is built."""
    from autoreg._contract import STORE, classify
    from autoreg._facts import situation
    from autoreg._record import record_of
    from autoreg._state import CONSTRUCTING, Building

    module = autoreg.Module()
    record = record_of(module)
    d = module.__dict__
    at_run_time = classify(record, situation(record, d, "z", torch.tensor([1j]), None, None))
    d[CONSTRUCTING] = Building(d)
    built = classify(record, situation(record, d, "z", torch.tensor([1j]), None, None))
    real = classify(record, situation(record, d, "x", torch.tensor([1.0]), None, None))
    assert (built.row, built.action, built.moves) == (10, STORE, True)
    assert (at_run_time.row, at_run_time.action, at_run_time.moves) == (11, STORE, True)
    assert (real.row, real.action) == (10, real.action.REGISTER)


# --- the rest of the core: register_tensors, strict and warn mode -------------------------------


class ThirdParty(nn.Module):
    """A class that cannot be edited: its complex table and its real mask are plain attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.freqs_cis = _freqs_cis(4, 4)
        self.mask = torch.ones(4)


@DROPS_IMAGINARY
def test_register_tensors_leaves_a_complex_tensor_a_plain_attribute() -> None:
    """register_tensors makes buffers, which .to(a real dtype) casts: a complex tensor stays the
    plain attribute the class made it (as the audit advises: move it where it is used), and the
    model keeps its values. It was registered, and .to(torch.bfloat16) dropped its imaginary
    part."""
    model = ThirdParty()
    table = model.freqs_cis
    assert autoreg.register_tensors(model) == ["mask"]
    assert role(model, "freqs_cis") == "plain"
    model.to(torch.bfloat16)
    assert model.freqs_cis is table
    assert model.mask.dtype == torch.bfloat16
    [report] = [u for u in autoreg.find_unregistered(model) if u.path == "freqs_cis"]
    assert "complex" in report.fix


def _undeclared_complex(mode: str, when: str) -> type[nn.Module]:
    class Model(autoreg.Module, **{mode: True}):  # type: ignore[call-arg]
        def __init__(self) -> None:
            super().__init__()
            if when == "built":
                self.freqs_cis = _freqs_cis(4, 4)

    return Model


_WHEN = pytest.mark.parametrize("when", ["built", "run time"])
_BUFFER_FIXES = ("autoreg.Persistent", "autoreg.NonPersistent", "nn.Buffer", ": torch.Tensor")


def _assign(cls: type[nn.Module], when: str) -> nn.Module:
    model = cls()
    if when == "run time":
        model.freqs_cis = _freqs_cis(4, 4)
    return model


@_WHEN
def test_strict_modes_error_for_a_complex_tensor_offers_no_buffer(when: str) -> None:
    """A buffer is what .to(a real dtype) casts: strict mode's fixes for a complex tensor are
    carried (autoreg.Carried first) or never moved, and say why (they offered a buffer)."""
    cls = _undeclared_complex("strict", when)
    with pytest.raises(autoreg.UnregisteredTensorError, match="freqs_cis") as raised:
        _assign(cls, when)
    message = str(raised.value)
    assert "freqs_cis: autoreg.Carried" in message
    assert "drop its imaginary part" in message
    assert not [fix for fix in _BUFFER_FIXES if fix in message], message


@_WHEN
def test_warn_modes_message_for_a_complex_tensor_says_why_it_is_carried(when: str) -> None:
    """Warn mode says that a complex tensor is carried and never cast to a real dtype, with the
    fixes strict mode offers; one built with the module is no runtime state (it said so)."""
    cls = _undeclared_complex("warn", when)
    with pytest.warns(autoreg.AutoRegisterWarning, match="freqs_cis") as caught:
        model = _assign(cls, when)
    [message] = [str(w.message) for w in caught if "freqs_cis" in str(w.message)]
    assert "never cast to a real dtype" in message
    assert "runtime state" not in message.splitlines()[0]
    assert not [fix for fix in _BUFFER_FIXES if fix in message], message
    model.to(torch.bfloat16)
    assert model.freqs_cis.dtype == torch.complex64
