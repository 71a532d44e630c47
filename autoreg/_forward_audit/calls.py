"""What the forward's own calls say about devices: ``x.device``, ``device=``, ``.to()``, ``.cpu()``.

On the CPU, ``torch.zeros(n, device=x.device)`` and ``torch.zeros(n)`` make the same tensor, and
the operation below sees ``device=cpu`` in both. What tells them apart is the call the code wrote,
which ``Calls``, a ``TorchFunctionMode``, sees before the operation runs:

- ``x.device`` of a tensor that follows the model gives ``MODEL_DEVICE``: a CPU device of the
  audit's own, known by its identity, so that a call given it (``device=x.device``,
  ``.to(x.device)``) makes its tensors on the model's device. Any other CPU device (``"cpu"``, a
  device a module keeps from its constructor) is the default device; ``"cuda"`` and other
  accelerators are where a moved model is, and run on the CPU here. ``MODEL_DEVICE`` is
  ``cpu:0``, which torch runs on the CPU and which compares unequal to ``cpu``, the device of a
  tensor on the default device: ``self.table.device != x.device`` is true, as on a GPU, and a
  forward that moves its table when the devices differ moves it here too. A copy of it
  (``torch.device(x.device)``, ``str(x.device)``) is the model's device as well; code that
  writes ``"cpu:0"`` itself, which nothing else here makes, is taken for it too.
- ``module.to(x)`` moves the module's tensors to x's device, which ``nn.Module.to`` reads in C
  (``_parse_to``), not through ``x.device``: the model's device where x follows the model.
- ``.to(...)``, ``.type_as(t)``, ``.cuda()`` and ``.cpu()`` move a tensor to or from the model's
  device: where the CPU returns the tensor itself, the audit makes the copy a GPU would.
  ``.numpy()`` of a tensor on the model's device, which CUDA refuses, is told to ``on_numpy``.
- ``conv1d``, ``conv2d`` and ``conv3d`` check that the input's dtype is the bias's before any
  operation runs (where the dispatch mode would see the mix): an input in another floating
  dtype is told to ``on_bias_mix``, which returns the arguments to run with.
- The call running now (``Call``) tells the operations below it whether a factory without a
  tensor argument made its tensor on the model's device: what the call said (``device=``), else
  whether one of its tensor arguments follows the model (a factory inside an operation on the
  model's tensors), else the default device.

Autograd (``backward``, ``torch.autograd.grad``) runs a ``backward`` written in Python with this
mode off: there, a factory in the user's code is judged by its line (the same as in the forward
pass; the default device for a line first met there), and one of autograd's own follows the
model.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import torch
from torch.overrides import TorchFunctionMode

from .rules import tensors_in
from .sites import Lines, Site, called_by_torch
from .tags import Tag, Tags

__all__ = ["MODEL_DEVICE", "Call", "Calls", "dtype_origins"]

# The model's device, on the CPU: compared by identity; unequal to the default device, "cpu"
MODEL_DEVICE: Final = torch.device("cpu", 0)

_DEVICE: Final = torch.Tensor.device.__get__
_DTYPE: Final = torch.Tensor.dtype.__get__  # type: ignore[attr-defined]
# How nn.Module.to reads its arguments: .to(x) takes x's device, read in C, not through x.device.
_PARSE_TO: Final = torch._C._nn._parse_to
_AUTOGRAD: Final = frozenset({torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad})
_MOVES: Final = frozenset(
    {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.type, torch.Tensor.type_as}
)
# The calls by which code casts a tensor itself (a cast inside another operation is torch's).
_CASTS: Final = frozenset(
    {
        torch.Tensor.to,
        torch.Tensor.type,
        torch.Tensor.type_as,
        *(getattr(torch.Tensor, name) for name in ("float", "double", "half", "bfloat16")),
        *(getattr(torch.Tensor, name) for name in ("int", "long", "short", "bool", "byte")),
        *(getattr(torch.Tensor, name) for name in ("char", "cfloat", "cdouble")),
    }
)


# Their composite checks the input's dtype against the bias's before dispatching anything.
_CONVOLUTIONS: Final = frozenset({torch.conv1d, torch.conv2d, torch.conv3d})


def _mixed(tensor: torch.Tensor, other: torch.Tensor) -> bool:
    """Two floating tensors of different dtypes."""
    return tensor.is_floating_point() and other.is_floating_point() and tensor.dtype != other.dtype


@dataclasses.dataclass(frozen=True)
class Call:
    """The call of the forward's code running now, as the operations below it need it.

    ``target``: whether it said to make its tensors on the model's device (``True``), on the
    default device (``False``), or did not say (``None``); ``inputs``: whether one of its tensor
    arguments follows the model; ``device_attribute``: the attribute of a module of the model
    that held the default device it was given (``self.device``); ``autograd``: a call of autograd,
    under which Python code runs unseen; ``cast``: a cast the code wrote (``.float()``,
    ``.to(dtype)``), not one inside another operation; ``like``: for a cast, the tensor whose
    dtype it takes (``.type_as(x)``, ``.to(x)``, ``.to(x.dtype)``: read just before it);
    ``torch``: a call torch's own code made (``called_by_torch``), whose dtypes are torch's.
    """

    target: bool | None
    inputs: bool
    device_attribute: str = ""
    autograd: bool = False
    cast: bool = False
    like: torch.Tensor | None = None
    torch: bool = False


class Calls(TorchFunctionMode):
    """Sees the forward's calls; keeps ``call``, the one running now."""

    def __init__(
        self,
        tags: Tags,
        lines: Lines,
        run_device: torch.device,
        devices: dict[int, dict[int, str]],
    ) -> None:
        """``run_device``: where the copy runs (the CPU, or meta for a model built there);
        ``devices``: the devices the copy's modules keep in attributes, by id, with the modules
        that keep each, by id, and the name of the attribute (``self.device``)."""
        super().__init__()
        self.tags = tags
        self.lines = lines
        self.run_device = run_device
        self.devices = devices
        self.call: Call | None = None
        # Told of each .numpy() of a tensor on the model's device: CUDA refuses it.
        self.on_numpy: Callable[[torch.Tensor], None] = lambda tensor: None
        # Told of a cast the code wrote that returned its tensor as it is (``.float()`` of a
        # float32 one); returns the tensor to go on with.
        self.on_noop_cast: Callable[[torch.Tensor], torch.Tensor] = lambda tensor: tensor
        # Told of a convolution whose input and bias differ in floating dtype; returns the
        # arguments to run it with.
        self.on_bias_mix: Callable[[tuple[Any, ...], torch.Tensor], tuple[Any, ...]] = (
            lambda args, bias: args
        )
        # The memory of the copies made to the CPU: data lifted from it (torch.from_numpy of
        # its .numpy()) was copied back too.
        self.copied: set[int] = set()
        # The dtype the code read last (``x.dtype``) and of which tensor, when the call right
        # after it is a cast: ``.to(x.dtype)`` takes x's dtype.
        self._read: tuple[torch.dtype, weakref.ref[torch.Tensor]] | None = None
        # The device the code read last (``t.device``) of a tensor on the default device, and
        # of which tensor: ``.to(t.device)`` goes where t is, and t's causes are its.
        self._read_device: tuple[torch.device, weakref.ref[torch.Tensor]] | None = None

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func == _DEVICE:  # a new method-wrapper at each access: equal, not identical
            device: torch.device = func(*args)
            if device.type == "cpu" and self.tags.follows(args[0]):
                return MODEL_DEVICE
            self._read_device = device, weakref.ref(args[0])
            return device
        if func == _DTYPE:
            dtype: torch.dtype = func(*args)
            self._read = dtype, weakref.ref(args[0])
            return dtype
        read, self._read = self._read, None
        device_read, self._read_device = self._read_device, None
        if func is _PARSE_TO:
            return self._parse_to(args, kwargs)
        numpy = func is torch.Tensor.numpy and args[0].device.type == "cpu"
        if numpy and self.tags.follows(args[0]):
            self.on_numpy(args[0])
        if func in _CONVOLUTIONS and args and isinstance(args[0], torch.Tensor):
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(bias, torch.Tensor) and _mixed(args[0], bias):
                args = self.on_bias_mix(args, bias)
        func, args, kwargs, target, attribute = self._target(func, args, kwargs)
        whose = None
        if func is torch.Tensor.to and device_read is not None and target is False:
            given = kwargs.get("device", args[1] if len(args) > 1 else None)
            whose = device_read[1]() if given is device_read[0] else None
        inputs = any(self.tags.follows(t) for t in tensors_in((args, kwargs)))
        like = _like(func, args, kwargs, read) if func in _CASTS else None
        by_torch = called_by_torch(sys._getframe(1), func)
        call = Call(target, inputs, attribute, func in _AUTOGRAD, func in _CASTS, like, by_torch)
        outer, self.call = self.call, call
        try:
            result = func(*args, **kwargs)
        finally:
            self.call = outer
        if func in _MOVES and target is not None and isinstance(result, torch.Tensor):
            return self._moved(args[0], result, target, attribute, like, whose)
        if func in _CASTS and like is None and not by_torch and result is args[0]:
            return self.on_noop_cast(result)
        return result

    # --- where a call says its tensors go ---------------------------------------------------------

    def _target(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, tuple[Any, ...], dict[str, Any], bool | None, str]:
        """``(func, args, kwargs, target, attribute)``: the call to run (an accelerator's device
        replaced by the one the copy runs on), whether it moves or makes tensors on the model's
        device, and the module attribute that held a default device it was given."""
        if func is torch.Tensor.cpu:
            return func, args, kwargs, False, ""
        if func is torch.Tensor.cuda:
            return torch.Tensor.to, (args[0], self.run_device), {}, True, ""
        if func is torch.Tensor.type_as and len(args) > 1 and isinstance(args[1], torch.Tensor):
            return func, args, kwargs, self.tags.follows(args[1]), ""
        if func is torch.Tensor.type and args[1:] and isinstance(args[1], str):
            if ".cuda." in args[1]:  # 'torch.cuda.FloatTensor': the model's device
                cpu = args[1].replace(".cuda.", ".")
                return func, (args[0], cpu, *args[2:]), kwargs, True, ""
            return func, args, kwargs, None, ""
        if func is torch.Tensor.to:
            return self._to(args, kwargs)
        if "device" in kwargs:
            target, device, attribute = self._device(kwargs["device"])
            return func, args, {**kwargs, "device": device}, target, attribute
        return func, args, kwargs, None, ""

    def _to(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, tuple[Any, ...], dict[str, Any], bool | None, str]:
        """``tensor.to(...)``: to a device (positional or ``device=``), or to another tensor's."""
        func = torch.Tensor.to
        if "device" in kwargs:
            target, device, attribute = self._device(kwargs["device"])
            return func, args, {**kwargs, "device": device}, target, attribute
        if len(args) > 1:
            first = args[1]
            if isinstance(first, torch.Tensor):
                return func, args, kwargs, self.tags.follows(first), ""
            if isinstance(first, (torch.device, str, int)):
                target, device, attribute = self._device(first)
                return func, (args[0], device, *args[2:]), kwargs, target, attribute
        return func, args, kwargs, None, ""

    def _parse_to(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``module.to(x)``: x's device, the model's where x follows the model (as ``x.device``
        is), for the ``tensor.to(device, dtype)`` of each of the module's tensors."""
        device, *rest = _PARSE_TO(*args, **kwargs)
        follows = any(self.tags.follows(t) for t in tensors_in((args, kwargs)))
        if follows and device is not None and device.type == "cpu":
            device = MODEL_DEVICE
        return (device, *rest)

    def _device(self, value: Any) -> tuple[bool | None, Any, str]:
        """``(target, device to run on, attribute)`` for a device the code gave a call."""
        if value is None:
            return None, value, ""
        if value is MODEL_DEVICE:
            return True, value, ""
        try:
            device = torch.device(value)
        except (RuntimeError, TypeError):
            return None, value, ""
        if device == MODEL_DEVICE:  # a copy of it: torch.device(x.device), str(x.device)
            return True, value, ""
        if device.type == "cpu":
            return False, value, self._keeper(self.devices.get(id(value), {}))
        return True, self.run_device, ""  # an accelerator: where a moved model is

    @staticmethod
    def _keeper(keepers: dict[int, str]) -> str:
        """Of the modules that keep a device (every part of a model built from one config keeps
        the same string), the attribute of the nearest on the stack: the code that used it."""
        if len(keepers) > 1:
            frame: FrameType | None = sys._getframe(2)
            while frame is not None:
                found = keepers.get(id(frame.f_locals.get("self")))
                if found is not None:
                    return found
                frame = frame.f_back
        return next(iter(keepers.values()), "")

    # --- the copy a GPU would make ----------------------------------------------------------------

    def _moved(
        self,
        source: torch.Tensor,
        result: torch.Tensor,
        target: bool,
        attribute: str,
        like: torch.Tensor | None = None,
        whose: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``result`` of moving ``source`` to (``target``) or from the model's device: a new
        tensor, as on a GPU, where the CPU returned ``source`` itself; ``attribute``: the module
        attribute that held the default device it was moved to (``.to(self.device)``);
        ``like``: the tensor whose dtype the call gave it; ``whose``: the tensor whose device it
        was moved to (``.to(t.device)``), which is on the default device."""
        sites = self.tags.sites(source)
        taken = like is not None and dtype_origins(self.tags.sites(like), result.dtype)
        if target and self.tags.follows(source) and taken:
            return result  # cast to a dtype another line gave: tagged as following it
        if self.tags.follows(source) == target and _same_storage(source, result):
            if attribute and not target:  # .to(self.device) of a tensor on the CPU already:
                # what leaves it there is that device, kept from the constructor.
                kept = tuple(dataclasses.replace(site, host=False) for site in sites)
                fixed = self.lines.site(
                    "moved", host=True, device_attribute=attribute, dtype=result.dtype
                )
                self.tags.set(result, Tag(False, (*kept, fixed)))
            return result
        if not target and not attribute and not self.tags.follows(source):
            return result  # a cast on the default device, where the tensor was: tagged as one
        if _same_storage(source, result):
            result = result.clone()
        if target:
            # Moved to the model's device: this line is where the code could also give it the
            # model's dtype (.to(x), not .to(x.device)); a cast of the model's values stays one.
            origins = [s for s in sites if s.dtype == result.dtype and not s.internal]
            island = bool(origins) and all(site.island for site in origins)
            moved = self.lines.site("moved", dtype=result.dtype, island=island)
            # A held-back finding goes with it while it keeps the dtype it promoted to.
            held = self.tags.pending(source) if result.dtype == source.dtype else frozenset()
            self.tags.set(result, Tag(True, (moved,), held))
        elif whose is not None and any(site.host for site in self.tags.sites(whose)):
            # Moved where a tensor left on the default device is (a plain attribute's zeros_like):
            # what left that one there leaves this one too, and fixing it moves both.
            left = tuple(site for site in self.tags.sites(whose) if site.host)
            self.tags.set(result, Tag(False, left))
        else:
            back: Site = self.lines.site(
                "copied back",
                host=True,
                copied_back=not attribute,
                device_attribute=attribute,
                dtype=result.dtype,
            )
            self.tags.set(result, Tag(False, (*sites, back)))
            if result.numel():
                self.copied.add(result.data_ptr())
        return result


def dtype_origins(sites: tuple[Site, ...], dtype: torch.dtype) -> tuple[Site, ...]:
    """The sites of the code that gave a tensor ``dtype`` (torch's own casts give none)."""
    return tuple(site for site in sites if site.dtype == dtype and not site.internal)


def _like(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    read: tuple[torch.dtype, weakref.ref[torch.Tensor]] | None,
) -> torch.Tensor | None:
    """The tensor whose dtype a cast takes: ``.type_as(x)``, ``.to(x)``, or ``.to(x.dtype)``
    with ``read`` the dtype the code read just before, and of which tensor."""
    other = args[1] if len(args) > 1 else kwargs.get("other")
    if isinstance(other, torch.Tensor) and func in (torch.Tensor.type_as, torch.Tensor.to):
        return other
    if func is not torch.Tensor.to or read is None:
        return None
    dtypes = [a for a in (*args[1:], kwargs.get("dtype")) if isinstance(a, torch.dtype)]
    tensor = read[1]()
    return tensor if dtypes and dtypes[0] == read[0] else None


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    try:
        return a.untyped_storage() is b.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return False
