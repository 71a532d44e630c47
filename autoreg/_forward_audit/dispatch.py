"""The dispatch mode that judges every ATen operation of the pass by CUDA's rules.

It sees the tensor arguments of each operation. A CPU tensor with a dimension next to a stand-in
tensor is a device finding, except in the arguments CUDA takes from the CPU on purpose
(``rules.CPU_OK``); the audit then moves the stray to the stand-in device and the pass goes on,
so that one pass reports every stray. In the low-precision pass, a tensor of another floating
dtype that promotes an operation, or that an operation which does not promote meets next to
``bfloat16`` ones, is a dtype finding. Every finding is recorded once per site the stray came
from (``sites``), with the fix ``fixes`` words. Values that meta does not have come from
``values.Values``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._audit import Finding
from .finding import ForwardFinding, Kind
from .fixes import stray_finding
from .rules import (
    CPU_OK,
    LIFTS,
    RANDOM,
    READS,
    STAND_IN,
    cast,
    invoke,
    keeps_dtype,
    left_behind,
    named_tensors,
    target_device,
    tensors_in,
    written,
)
from .sites import ByTensor, Lines, Site, merged
from .values import Values

__all__ = ["Audit"]

Findings = dict[tuple[str | int, ...], ForwardFinding]


class Audit(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Judges every ATen operation of the pass by CUDA's rules and records the strays."""

    def __init__(
        self,
        lines: Lines,
        attributes: dict[int, Finding],
        dtype: torch.dtype | None,
        findings: Findings,
        values: Values,
        input_dims: set[int],
        *,
        devices: bool,
    ) -> None:
        """``lines``: the user's line now, and what the code there names; ``attributes``: the
        plain attributes ``.to()`` left behind, by id; ``dtype``: the pass's floating dtype,
        against which dtype strays are judged; ``findings``: where findings go; ``values``: the
        values of stand-in tensors where they are known (the inputs); ``input_dims``: the
        inputs' dimensions above 1 (a tensor with one of them is not the same at every call);
        ``devices``: whether to record device findings (the dtype pass does not repeat them)."""
        super().__init__()  # type: ignore[no-untyped-call]
        self.lines = lines
        self.attributes = attributes
        self.dtype = dtype
        self.findings = findings
        # Known values: the inputs (the caller's tensors, never written to) and what is computed
        # from them alone (lengths.max(), mask.all()).
        self.values = values
        self.input_dims = input_dims
        self.devices = devices
        self.moved_grad = False  # a stray that requires grad was moved: backward may not follow
        self.sites: ByTensor[tuple[Site, ...]] = ByTensor()
        self.foreign: set[int] = set()  # the storages of the tensors made before the pass
        self.made: ByTensor[tuple[str, int]] = ByTensor()  # the user's line that computed it

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        named = named_tensors(func, args, kwargs)
        tensors = [t for _, t in named]
        stand_in = [t for t in tensors if t.device.type == STAND_IN.type]
        if stand_in and name in READS:
            return self.values.read(func, args, kwargs)
        for tensor in tensors:
            if tensor not in self.sites and tensor.dim() and left_behind(tensor):
                self._tag_entered(tensor, name)
        replace: dict[int, torch.Tensor] = {}
        if stand_in:
            ok = CPU_OK.get(name, frozenset())
            for arg, tensor in named:
                if tensor.dim() and arg not in ok and left_behind(tensor):
                    if self.devices:
                        self._record("device", tensor, func, stand_in)
                    self.moved_grad = self.moved_grad or tensor.requires_grad
                    replace[id(tensor)] = tensor.to(STAND_IN)
        for tensor in written(func, args, kwargs):
            if tensor.device.type == "cpu" and (
                tensor not in self.sites or tensor.untyped_storage().data_ptr() in self.foreign
            ):
                # Not made by this pass (a global, a closure's): written on a copy, so that the
                # caller's state is left as it was.
                replace.setdefault(id(tensor), tensor.clone())
        if name == "copy_" and args[0].device.type == "cpu" and stand_in:
            return args[0]  # a copy to the CPU from a device without values: nothing to copy
        if name == "_to_copy" and stand_in and target_device(kwargs, args[0]).type == "cpu":
            original = self.values.known.get(args[0])
            if original is None:  # values read back from the stand-in device: ones
                original = torch.ones(args[0].shape, dtype=args[0].dtype)
            out = original.to(dtype=kwargs.get("dtype") or args[0].dtype, copy=True)
            self.sites[out] = (
                self.lines.site(
                    "copied back",
                    copied_back=True,
                    typed=kwargs.get("dtype") not in (None, args[0].dtype),
                ),
            )
            return out
        try:
            result = self._call(func, args, kwargs, replace, named, stand_in)
        except Exception as error:  # noqa: BLE001 - raised again if no input on the CPU helps
            result = self.values.on_the_cpu(error, func, args, kwargs, replace, named)
        self._tag_outputs(func, name, kwargs, tensors, result)
        self.values.follow(func, args, kwargs, result)
        return result

    # --- running the operation, with the dtype rules of the low-precision pass ------------------

    def _call(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replace: dict[int, torch.Tensor],
        named: list[tuple[str, torch.Tensor]],
        stand_in: list[torch.Tensor],
    ) -> Any:
        low = self.dtype
        if low is None or not any(t.dtype == low for _, t in named):
            return invoke(func, args, kwargs, replace)
        strays = [t for _, t in named if self._dtype_stray(t, low)]
        if not strays:
            return invoke(func, args, kwargs, replace)
        try:
            result = invoke(func, args, kwargs, replace)
        except Exception:  # noqa: BLE001 - tried again below with the strays converted
            # Raises again if the dtypes were not the reason.
            result = invoke(func, args, kwargs, cast(replace, strays, low))
            for tensor in strays:
                self._record("dtype", tensor, func, stand_in, raises=True)
            return result
        floating = [t for t in strays if t.is_floating_point()]
        promoted = {t.dtype for t in tensors_in(result) if t.is_floating_point()} - {low}
        culprits = [t for t in floating if t.dtype in promoted]
        if culprits:
            for tensor in culprits:
                self._record("dtype", tensor, func, stand_in, result=min(promoted, key=str))
            # The pass goes on in low precision, so that later strays show up on their own.
            return invoke(func, args, kwargs, cast(replace, culprits, low))
        if floating and not keeps_dtype(func, args, low):
            # No promotion, yet two floating dtypes: an operation that does not promote (mm,
            # linear, embedding), which meta runs and CUDA rejects.
            for tensor in floating:
                self._record("dtype", tensor, func, stand_in, raises=True)
        return result

    def _dtype_stray(self, tensor: torch.Tensor, low: torch.dtype) -> bool:
        if tensor.dtype in (low, torch.bool) or not tensor.dim():
            return False
        sites = self.sites.get(tensor)
        return sites is not None and any(not site.typed for site in sites)

    # --- tags ---------------------------------------------------------------------------------

    def _tag_entered(self, tensor: torch.Tensor, name: str) -> None:
        if name in LIFTS:
            return  # torch.tensor(data) in forward: tagged as made there, below
        attribute = self.attributes.get(id(tensor))
        self.sites[tensor] = (self.lines.site("entered", entered=True, attribute=attribute),)
        self.foreign.add(tensor.untyped_storage().data_ptr())

    def _tag_outputs(
        self,
        func: Any,
        name: str,
        kwargs: dict[str, Any],
        tensors: list[torch.Tensor],
        result: Any,
    ) -> None:
        outputs = tensors_in(result)
        if not outputs:
            return
        sites: tuple[Site, ...] | None
        if name in LIFTS or not tensors:  # made from nothing: a factory, or lifted data
            made = self.lines.site(
                name,
                typed=kwargs.get("dtype") is not None,
                random=name if name in RANDOM else "",
                shaped=not self.input_dims.isdisjoint(outputs[0].shape),
            )
            sites = (made,)
        else:  # computed: from every site of its inputs; a 0-dim input is a scalar to CUDA,
            # and makes no stray of a tensor computed with a dimensioned one (torch's sdpa turns
            # a bool mask into a float one with where(mask, scalar_tensor(0), scalar_tensor(-inf)))
            sites = merged(self.sites.get(t) for t in tensors if t.dim())
            if sites is None:
                sites = merged(self.sites.get(t) for t in tensors)
            if (
                sites is not None
                and name == "_to_copy"
                and kwargs.get("dtype") not in (None, tensors[0].dtype)
            ):
                sites = tuple(dataclasses.replace(site, typed=True) for site in sites)
        line = self.lines.line()
        for out in outputs:
            if out not in self.made:
                self.made[out] = line
            if sites is not None and out not in self.sites:
                self.sites[out] = sites

    # --- findings -------------------------------------------------------------------------------

    def _record(
        self,
        kind: Kind,
        tensor: torch.Tensor,
        func: Any,
        stand_in: list[torch.Tensor],
        *,
        raises: bool = False,
        result: torch.dtype | None = None,
    ) -> None:
        """Record a finding for each site ``tensor`` came from (for a dtype finding: each site
        whose code did not write its dtype); ``result``: the dtype ``func`` promoted to."""
        sites = self.sites.get(tensor)
        if sites is None:  # a 0-dim tensor, or one lifted by torch.tensor: tag it here
            sites = (self.lines.site("made"),)
            self.sites[tensor] = sites
        op = func.overloadpacket.__name__
        op_line = self.lines.line()
        for site in sites:
            key = (kind, *site.key)
            if key in self.findings or (kind == "dtype" and site.typed):
                continue
            self.findings[key] = stray_finding(
                kind,
                site,
                tensor,
                op,
                op_line,
                stand_in,
                self.dtype,
                None if raises else result,
                self.lines.mode,
            )
