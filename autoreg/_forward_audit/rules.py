"""CUDA's rules, per ATen operation, and the helpers that read an operation's schema.

Which arguments take a CPU tensor next to device tensors on purpose (index tensors, a copy's
source, packed-sequence lengths), which operations take another floating dtype next to
``bfloat16`` on purpose (conversions, normalisations), which make tensors from nothing, and
which read values back to Python. The schema helpers name an operation's tensor arguments, the
ones it writes to, and run it with some of them replaced.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any, Final

import torch
from torch.utils._pytree import tree_flatten, tree_map_only

__all__ = [
    "CASTS",
    "CPU_OK",
    "LIFTS",
    "MIXED_OK",
    "RANDOM",
    "READS",
    "STAND_IN",
    "cast",
    "complex_of",
    "floating",
    "invoke",
    "keeps_dtype",
    "left_behind",
    "named_tensors",
    "run",
    "takes_cpu_scalars",
    "target_device",
    "tensors_in",
    "writes_self",
    "written",
]

STAND_IN: Final = torch.device("meta")

# The arguments that take a CPU tensor next to device tensors.
CPU_OK: Final[dict[str, frozenset[str]]] = {
    "copy_": frozenset({"self", "src"}),  # a transfer between devices
    "index": frozenset({"indices"}),  # x[cpu_index]: CUDA moves the indices
    "index_put": frozenset({"indices"}),
    "index_put_": frozenset({"indices"}),
    "_index_put_impl_": frozenset({"indices"}),
    "_unsafe_index": frozenset({"indices"}),
    "_unsafe_index_put": frozenset({"indices"}),
    "_pack_padded_sequence": frozenset({"lengths"}),  # must be on the CPU
    "_pad_packed_sequence": frozenset({"batch_sizes"}),  # a PackedSequence's: on the CPU
    "lstm": frozenset({"batch_sizes"}),
    "gru": frozenset({"batch_sizes"}),
    "rnn_tanh": frozenset({"batch_sizes"}),
    "rnn_relu": frozenset({"batch_sizes"}),
    "ctc_loss": frozenset({"input_lengths", "target_lengths"}),
    "_ctc_loss": frozenset({"input_lengths", "target_lengths"}),
}
# Operations that take another floating dtype next to bfloat16 on purpose: conversions, and the
# normalisations whose CUDA kernels accept float32 weights and statistics with half inputs.
MIXED_OK: Final = frozenset(
    {
        "copy_",
        "_to_copy",
        "to",
        "type_as",
        "native_layer_norm",
        "layer_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "batch_norm",
        "cudnn_batch_norm",
        "native_group_norm",
        "group_norm",
        "rms_norm",
        "_fused_rms_norm",
    }
)
CASTS: Final = frozenset({"_to_copy", "to", "type_as"})  # type_as and to: as inference mode sees
_NO_HALF_KERNEL: Final = re.compile(r"not implemented for '(BFloat16|Half)'")
RANDOM: Final = frozenset({"rand", "randn", "randint", "randperm", "normal", "bernoulli"})
LIFTS: Final = frozenset({"lift_fresh", "lift_fresh_copy", "lift"})  # torch.tensor(data)
READS: Final = frozenset({"_local_scalar_dense", "is_nonzero", "equal"})  # to Python values


@functools.cache
def takes_cpu_scalars(func: Any) -> bool:
    """Whether CUDA's kernel of the operation ``func`` takes a 0-dim CPU tensor beside CUDA
    tensors, as a scalar: the element-wise operations (TensorIterator's), which torch's
    ``native_functions.yaml`` marks ``device_check: NoCheck``. For any other ATen operation
    (``clamp.Tensor``, ``index_select``, ``cat``, ``mm``), torch's generated code checks that
    every tensor is on one device, 0-dim or not. An operation the file does not list (another
    library's), or a torch without the file, is given the benefit of the doubt: taken as
    taking scalars, as the audit always did."""
    schema = func._schema
    namespace, _, name = schema.name.partition("::")
    if namespace != "aten":
        return True
    key = f"{name}.{schema.overload_name}" if schema.overload_name else name
    listed, unchecked = _device_checks()
    return key in unchecked or key not in listed


@functools.cache
def _device_checks() -> tuple[frozenset[str], frozenset[str]]:
    """The ATen operations ``native_functions.yaml`` lists (``name.overload``), and those it marks
    ``device_check: NoCheck``: read from the copy torch installs with ``torchgen`` (a line scan,
    a few milliseconds, once), without importing it. Empty when it is not there."""
    spec = importlib.util.find_spec("torchgen")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(*locations[:1], "packaged", "ATen", "native", "native_functions.yaml")
    try:
        text = path.read_text(encoding="utf-8") if locations else ""
    except OSError:
        text = ""
    listed: set[str] = set()
    unchecked: set[str] = set()
    current = None
    for line in text.splitlines():
        if line.startswith("- func: "):
            current = line[len("- func: ") :].partition("(")[0]
            listed.add(current)
        elif current is not None and line.strip().startswith("device_check: NoCheck"):
            unchecked.add(current)
    return frozenset(listed), frozenset(unchecked)


def named_tensors(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, torch.Tensor]]:
    """``(argument name, tensor)`` for every tensor argument, lists of tensors included."""
    named: list[tuple[str, torch.Tensor]] = []
    pairs = [
        *zip((a.name for a in func._schema.arguments), args, strict=False),
        *kwargs.items(),
    ]
    for arg, value in pairs:
        if isinstance(value, torch.Tensor):
            named.append((arg, value))
        elif isinstance(value, (list, tuple)):
            named.extend((arg, v) for v in value if isinstance(v, torch.Tensor))
    return named


def invoke(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], replace: dict[int, torch.Tensor]
) -> Any:
    """``func`` with the replaced tensors; an in-place op on a replaced ``self`` returns it."""
    if not replace:
        return func(*args, **kwargs)

    def swap(tensor: torch.Tensor) -> torch.Tensor:
        return replace.get(id(tensor), tensor)

    new_args, new_kwargs = tree_map_only(torch.Tensor, swap, (args, kwargs))
    result = func(*new_args, **new_kwargs)
    if writes_self(func) and id(args[0]) in replace and result is new_args[0]:
        return args[0]  # an in-place operation on a stray: the stray itself stays where it was
    return result


def run(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], replace: dict[int, torch.Tensor]
) -> Any:
    """``invoke``; where the CPU has no kernel for bfloat16 or float16 (CUDA has one), the
    operation runs in float32 and its floating outputs come back in the half dtype."""
    try:
        return invoke(func, args, kwargs, replace)
    except (NotImplementedError, RuntimeError) as error:
        match = _NO_HALF_KERNEL.search(str(error))
        if match is None:
            raise
        half = torch.bfloat16 if match[1] == "BFloat16" else torch.float16
    up = {}
    for tensor in tensors_in((args, kwargs)):
        value = replace.get(id(tensor), tensor)
        if value.dtype == half:
            up[id(tensor)] = value.float()
    result = invoke(func, args, kwargs, {**replace, **up})
    if writes_self(func) and id(args[0]) in up:
        replace.get(id(args[0]), args[0]).copy_(up[id(args[0])])
        return args[0]
    return tree_map_only(
        torch.Tensor, lambda t: t.to(half) if t.dtype == torch.float32 else t, result
    )


def written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors ``func`` writes to: ``self`` of an in-place operation, ``out=``."""
    written: list[torch.Tensor] = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[position] if position < len(args) else kwargs.get(argument.name)
        if isinstance(value, torch.Tensor):
            written.append(value)
    return written


def writes_self(func: Any) -> bool:
    schema = func._schema.arguments
    return bool(schema) and schema[0].alias_info is not None and schema[0].alias_info.is_write


def cast(
    replace: dict[int, torch.Tensor], tensors: list[torch.Tensor], dtype: torch.dtype
) -> dict[int, torch.Tensor]:
    """``replace`` with ``tensors`` converted to the model's ``dtype``: a complex one to its
    complex counterpart (``complex_of``), never to a real dtype (which drops its imaginary
    part and changes what the code computes)."""
    cast = dict(replace)
    for tensor in tensors:
        target = complex_of(dtype) if tensor.is_complex() else dtype
        cast[id(tensor)] = replace.get(id(tensor), tensor).to(target)
    return cast


def complex_of(dtype: torch.dtype) -> torch.dtype:
    """The complex dtype that is the model's ``dtype`` in complex form: what its own complex
    values are (``torch.view_as_complex`` of its float32 parameters, a float32 rotary table made
    complex in a bfloat16 model) and what ``dtype=A.dtype`` of them makes."""
    return torch.complex128 if dtype == torch.float64 else torch.complex64


def floating(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` holds floating or complex values: the dtypes ``.to(dtype)`` converts."""
    return tensor.is_floating_point() or tensor.is_complex()


def keeps_dtype(func: Any, args: tuple[Any, ...], low: torch.dtype) -> bool:
    """Whether ``func`` takes another floating dtype next to ``low`` on purpose."""
    if func.overloadpacket.__name__ in MIXED_OK:
        return True
    return writes_self(func) and isinstance(args[0], torch.Tensor) and args[0].dtype == low


def target_device(kwargs: dict[str, Any], tensor: torch.Tensor) -> torch.device:
    device = kwargs.get("device")
    return tensor.device if device is None else torch.device(device)


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors nested in ``value`` (lists, tuples, dicts), in order."""
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


def left_behind(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is where a moved model would not be: on the CPU."""
    return tensor.device.type == "cpu"
