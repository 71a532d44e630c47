"""dtype moves: buffers and carried tensors convert exactly as hand-registered buffers do.

nn.Module's rule: ``.half()/.float()/.double()/.bfloat16()`` convert floating point tensors only;
``.to(dtype)`` converts floating point and complex ones; integer and bool tensors keep their dtype;
``.type(dtype)`` converts everything. The twin registers every tensor as a buffer by hand; the
autoreg module has the same tensors as construction-time buffers, as carried runtime tensors and
inside a carried list. One exception, on purpose (contract, "What carried means"): a complex
tensor autoreg holds is never cast to a real dtype, where nn.Module casts the twin's buffer and
drops its imaginary part; it keeps its values, as the plain attribute it was before migrating.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import autoreg

VALUES: dict[str, torch.Tensor] = {
    "f32": torch.tensor([1.5, -2.25]),
    "f64": torch.tensor([1.5, -2.25], dtype=torch.float64),
    "f16": torch.tensor([1.5, -2.25], dtype=torch.float16),
    "bf16": torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
    "i64": torch.tensor([3, -4]),
    "i32": torch.tensor([3, -4], dtype=torch.int32),
    "u8": torch.tensor([3, 250], dtype=torch.uint8),
    "flag": torch.tensor([True, False]),
    "z": torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
    "image": torch.arange(16.0).reshape(1, 4, 2, 2),  # 4-d: memory_format conversions apply
}


class AutoMixed(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        for name, value in VALUES.items():
            setattr(self, name, value.clone())  # during construction: buffers


class TwinMixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for name, value in VALUES.items():
            self.register_buffer(name, value.clone(), persistent=False)
            self.register_buffer(f"rt_{name}", value.clone(), persistent=False)


def _auto() -> AutoMixed:
    module = AutoMixed()
    for name, value in VALUES.items():
        setattr(module, f"rt_{name}", value.clone())  # after construction: carried
    module.rt_list = [value.clone() for value in VALUES.values()]  # a carried list
    return module


def _expected(twin: nn.Module, attribute: str, name: str) -> torch.Tensor:
    """The twin's tensor; for a complex one the twin made real, the value as it was."""
    expected: torch.Tensor = getattr(twin, attribute)
    if VALUES[name].is_complex() and not expected.is_complex():
        return VALUES[name].to(expected.device)
    return expected


def _assert_like_twin(auto: nn.Module, twin: nn.Module) -> None:
    for name in VALUES:
        for attribute in (name, f"rt_{name}"):
            got, expected = getattr(auto, attribute), _expected(twin, attribute, name)
            assert got.dtype == expected.dtype, attribute
            assert got.is_contiguous() == expected.is_contiguous(), attribute
            assert torch.equal(got, expected), attribute
    for got, name in zip(auto.rt_list, VALUES, strict=True):
        expected = _expected(twin, name, name)
        assert got.dtype == expected.dtype, f"rt_list: {name}"
        assert torch.equal(got, expected), f"rt_list: {name}"


# nn.Module.to(real dtype) casts complex tensors and torch warns; it does so for the twin too.
DROPS_IMAGINARY = pytest.mark.filterwarnings(
    "ignore:Casting complex values to real discards the imaginary part:UserWarning"
)
# nn.Module.to(complex dtype) warns that complex modules are experimental, for the twin too.
COMPLEX_MODULE = pytest.mark.filterwarnings(
    "ignore:Complex modules are a new feature under active development:UserWarning"
)

CONVERSIONS = [
    pytest.param(lambda m: m.half(), id="half"),
    pytest.param(lambda m: m.float(), id="float"),
    pytest.param(lambda m: m.double(), id="double"),
    pytest.param(lambda m: m.bfloat16(), id="bfloat16"),
    pytest.param(lambda m: m.to(torch.float16), id="to(float16)", marks=DROPS_IMAGINARY),
    pytest.param(lambda m: m.to(torch.float64), id="to(float64)", marks=DROPS_IMAGINARY),
    pytest.param(lambda m: m.to(dtype=torch.bfloat16), id="to(dtype=bf16)", marks=DROPS_IMAGINARY),
    pytest.param(
        lambda m: m.to(torch.empty(0, dtype=torch.float64)), id="to(tensor)", marks=DROPS_IMAGINARY
    ),
    pytest.param(lambda m: m.to(torch.complex128), id="to(complex128)", marks=COMPLEX_MODULE),
    pytest.param(lambda m: m.to("cpu", torch.float16), id="to(cpu,float16)", marks=DROPS_IMAGINARY),
    pytest.param(lambda m: m.to(memory_format=torch.channels_last), id="channels_last"),
    pytest.param(lambda m: m.type(torch.float64), id="type(float64)"),
]


@pytest.mark.parametrize("convert", CONVERSIONS)
def test_conversion_matches_hand_registered_buffers(convert: Callable[[nn.Module], object]) -> None:
    auto, twin = _auto(), TwinMixed()

    returned = convert(auto)
    convert(twin)

    assert returned is auto
    _assert_like_twin(auto, twin)


def test_integer_bool_and_complex_keep_their_dtype_under_half() -> None:
    auto = _auto()

    auto.half()

    for prefix in ("", "rt_"):
        assert getattr(auto, f"{prefix}f32").dtype == torch.float16
        assert getattr(auto, f"{prefix}i64").dtype == torch.int64
        assert getattr(auto, f"{prefix}flag").dtype == torch.bool
        assert getattr(auto, f"{prefix}z").dtype == torch.complex64
    assert auto.rt_list[0].dtype == torch.float16


def test_to_integer_dtype_is_refused_as_for_nn_module() -> None:
    auto = _auto()

    with pytest.raises(TypeError, match=r"nn\.Module\.to only accepts floating point or complex"):
        auto.to(torch.int64)

    assert auto.rt_f32.dtype == torch.float32  # nothing half-converted


def test_carried_tensor_is_replaced_not_converted_in_place() -> None:
    """As for buffers: ``.double()`` rebinds, so an outside reference keeps the old tensor."""
    auto = _auto()
    outside = auto.rt_f32

    auto.double()

    assert outside.dtype == torch.float32
    assert auto.rt_f32 is not outside


_SIMPLE = [
    lambda m: m.half(),
    lambda m: m.float(),
    lambda m: m.double(),
    lambda m: m.bfloat16(),
    lambda m: m.to(torch.float16),
    lambda m: m.to(torch.float64),
]


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.sampled_from([n for n in VALUES if n != "z"]), min_size=1, unique=True),
    steps=st.lists(st.sampled_from(range(len(_SIMPLE))), min_size=1, max_size=4),
)
def test_any_sequence_of_conversions_matches_the_twin(names: list[str], steps: list[int]) -> None:
    auto, twin = autoreg.Module(), nn.Module()
    for name in names:
        setattr(auto, name, VALUES[name].clone())  # after construction: carried
        twin.register_buffer(name, VALUES[name].clone())

    for step in steps:
        _SIMPLE[step](auto)
        _SIMPLE[step](twin)

    for name in names:
        got, expected = getattr(auto, name), getattr(twin, name)
        assert got.dtype == expected.dtype, name
        assert torch.equal(got, expected), name
