"""The dispatch mode that sees every ATen operation of the pass and judges it by CUDA's rules.

Each operation runs as it is, on real values (on meta only for a model built there). Before it
runs, the audit looks at its tensor arguments (``tags``): a tensor that stays on the default
device, with at least one dimension, next to one that follows the model is a device finding -
except in the arguments CUDA takes from the CPU on purpose (``rules.CPU_OK``). In a pass with a
floating dtype, a tensor of another dtype made in the pass that promotes an operation of the
model's dtype, or makes it raise (or would on CUDA: ``mm`` does not promote), is a dtype finding;
a cast of the model's own values (``x.float()``, an island of float32 cast back with
``.type_as(x)``) that only promotes is precision on purpose; a promotion is held back until
what it computes meets the model (converted to the model's dtype first, it is none). After it
runs, its outputs are tagged: whether they follow the model, and the sites they came from (not
an index's: what CUDA takes from the CPU on purpose says nothing of where the result is).
Findings are recorded once per kind and site, as ``Record``s (``fixes`` words them at the end).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from types import FrameType
from typing import Any, Final

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._audit import Located
from .._frames import is_library
from .._messages.audits import RETURNED
from .._paths import AUTOREG_DIR, TORCH_DIR
from .calls import Calls, dtype_origins
from .finding import Kind
from .fixes import Records, record
from .rules import (
    CASTS,
    CPU_OK,
    LIFTS,
    RANDOM,
    READS,
    STAND_IN,
    cast,
    complex_of,
    floating,
    keeps_dtype,
    named_tensors,
    run,
    takes_cpu_scalars,
    target_device,
    tensors_in,
    written,
)
from .sites import ByTensor, Lines, Site, merged
from .tags import Tag, Tags, storage_key
from .values import Values

__all__ = ["Audit"]

_CONVOLUTION: Final = torch.ops.aten.convolution.default  # names the operation of a bias mix

# The frames between an operation's caller and this mode: not the caller. (A torch that adds
# another one makes a factory of a Python backward look like autograd's own: no finding.)
_PLUMBING: Final = (
    AUTOREG_DIR,
    *(
        TORCH_DIR + name
        for name in ("_ops.py", "utils/_python_dispatch.py", "overrides.py", "_compile.py")
    ),
    TORCH_DIR + "_dynamo" + os.sep,
)


class Audit(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Judges every ATen operation of the pass by CUDA's rules and records the strays."""

    def __init__(
        self,
        lines: Lines,
        tags: Tags,
        calls: Calls,
        attributes: dict[int, Located],
        dtype: torch.dtype | None,
        records: Records,
        values: Values | None,
        input_dims: set[int],
        *,
        devices: bool,
    ) -> None:
        """``lines``: the user's line now, and what the code there names; ``tags``: what is known
        of each tensor; ``calls``: the call of the forward's code running now; ``attributes``: the
        plain attributes ``.to()`` left behind, by id; ``dtype``: the pass's floating dtype,
        against which dtype strays are judged; ``records``: where findings go; ``values``: for a
        model built on meta, the values known (the inputs'), else ``None`` (the values are
        real); ``input_dims``: the inputs' dimensions above 1 (a tensor with one of them is not
        the same at every call); ``devices``: whether to record device findings (the dtype pass
        does not repeat them)."""
        super().__init__()  # type: ignore[no-untyped-call]
        self.lines = lines
        self.tags = tags
        self.calls = calls
        self.attributes = attributes
        self.dtype = dtype
        self.records = records
        self.values = values
        self.input_dims = input_dims
        self.devices = devices
        self.moved_grad = False  # a stray that requires grad was moved: backward may not follow
        self.foreign: set[object] = set()  # the storages of the tensors made before the pass
        self.made: ByTensor[tuple[str, int]] = ByTensor()  # the user's line that computed it
        # Whether the factory at a line (and origin) made its tensor on the model's device, as
        # the forward's calls said: for the same line run again where no call is seen (autograd).
        self.memo: dict[tuple[str, int, str], bool] = {}
        # The dtype findings held back: an operation a stray promoted to its dtype, whose result
        # may yet be converted to the model's dtype before it meets the model (a float32
        # timestep embedding converted before its MLP), which makes it no stray. Recorded when
        # it, or what is computed from it, meets a tensor of the model's dtype, is returned, or
        # at the end of the pass unless converted; ``cast_back``: the keys of the ones converted.
        self.pending: Records = {}
        self.cast_back: set[tuple[object, ...]] = set()
        self._held: frozenset[tuple[object, ...]] = frozenset()  # by the operation running now
        # The findings this pass made, in the order it met them: held-back ones are listed
        # where they were met first, not where they were recorded.
        self._order: dict[tuple[object, ...], int] = {}

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        # The audit's own tensor methods must not reach the forward's TorchFunctionMode.
        with torch._C.DisableTorchFunction():
            return self._dispatch(func, args, kwargs or {})

    def _dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        name = func.overloadpacket.__name__
        named = named_tensors(func, args, kwargs)
        tensors = [t for _, t in named]
        self._held = frozenset()
        if self.values is not None and name in READS and any(_on_meta(t) for t in tensors):
            return self.values.read(func, args, kwargs)
        # A 0-dim CPU tensor is a scalar to CUDA's element-wise kernels, a stray to the others.
        scalars = takes_cpu_scalars(func)
        for tensor in tensors:
            cpu = (tensor.dim() or not scalars) and tensor.device.type == "cpu"
            if cpu and name not in LIFTS and not self.tags.known(tensor):
                self._enter(tensor)
        model = [t for t in tensors if self.tags.follows(t)]
        ok = CPU_OK.get(name, frozenset())  # what CUDA takes from the CPU on purpose
        replace: dict[int, torch.Tensor] = {}
        if model:
            for arg, tensor in named:
                counts = tensor.dim() or not scalars
                if counts and arg not in ok and not self.tags.follows(tensor):
                    if self.devices:
                        self._record("device", tensor, func, model)
                    self.moved_grad = self.moved_grad or tensor.requires_grad
                    if self.values is not None:  # meta mixes with few CPU tensors: move it
                        replace[id(tensor)] = tensor.to(STAND_IN)
        for tensor in written(func, args, kwargs):
            if tensor.device.type == "cpu" and storage_key(tensor) in self.foreign:
                # Not the copy's (a global, a closure's): written on a copy, so that the caller's
                # state is left as it was.
                replace.setdefault(id(tensor), tensor.clone())
        if self.values is not None:
            copied = self._copied_back(func, name, args, kwargs, tensors)
            if copied is not None:
                return copied
        try:
            result = self._call(func, args, kwargs, replace, named, model)
        except Exception as error:
            if self.values is None:
                raise
            result = self.values.on_the_cpu(error, func, args, kwargs, replace, named)
        # What the outputs are made of: not an index (it says which values, not where they are)
        sources = [t for arg, t in named if arg not in ok] if ok else tensors
        self._tag_outputs(func, name, args, kwargs, tensors, sources, result)
        if self.values is not None:
            self.values.follow(func, args, kwargs, result)
        return result

    def _copied_back(
        self,
        func: Any,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        tensors: list[torch.Tensor],
    ) -> Any:
        """On meta: a copy to the CPU, whose values come from ``values`` (else ones)."""
        meta = [t for t in tensors if _on_meta(t)]
        if name == "copy_" and args[0].device.type == "cpu" and meta:
            return args[0]  # a copy to the CPU from a device without values: nothing to copy
        if name != "_to_copy" or not meta or target_device(kwargs, args[0]).type != "cpu":
            return None
        assert self.values is not None
        original = self.values.known.get(args[0])
        if original is None:  # values read back from the stand-in device: ones
            original = torch.ones(args[0].shape, dtype=args[0].dtype)
        out = original.to(dtype=kwargs.get("dtype") or args[0].dtype, copy=True)
        back = self.lines.site("copied back", host=True, copied_back=True, dtype=out.dtype)
        self.tags.set(out, Tag(False, (*self.tags.sites(args[0]), back)))
        return out

    # --- running the operation, with the dtype rules ----------------------------------------------

    def _call(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replace: dict[int, torch.Tensor],
        named: list[tuple[str, torch.Tensor]],
        model: list[torch.Tensor],
    ) -> Any:
        low = self.dtype
        met = self._meets(func, args, named, low) if low is not None else []
        if met and low is not None:  # recorded where they meet the model: the pass goes on
            replace = cast(replace, met, low)  # as with them fixed
        if low is None or not any(t.dtype == low for _, t in named):
            result = run(func, args, kwargs, replace)
            if low is not None:
                self._hold_along(func, named, model, result, low)
            return result
        strays = [t for _, t in named if self._dtype_stray(t, low) and not any(t is m for m in met)]
        if not strays:
            return run(func, args, kwargs, replace)
        try:
            result = run(func, args, kwargs, replace)
        except Exception:  # noqa: BLE001 - tried again below with the strays converted
            # Raises again if the dtypes were not the reason.
            result = run(func, args, kwargs, cast(replace, strays, low))
            for tensor in strays:
                self._record("dtype", tensor, func, model, raises=True)
            return result
        mixed = [t for t in strays if floating(t)]
        outputs = [t for t in tensors_in(result) if floating(t)]
        promoted = {t.dtype for t in outputs} - {low}
        culprits = [t for t in mixed if t.dtype in promoted and not self._island(t)]
        if culprits:
            # Held back until the result meets the model (``pending``): a culprit all of whose
            # findings are held back keeps its dtype, and the result the promoted one.
            held: set[tuple[object, ...]] = set()
            kept = []
            for tensor in culprits:
                keys = self._record(
                    "dtype", tensor, func, model, result=min(promoted, key=str), defer=True
                )
                if keys and all(key in self.pending for key in keys):
                    held.update(keys)
                    kept.append(tensor)
            self._held = frozenset(held)
            # The pass goes on as if the lines reported were fixed, so that later strays show up
            # on their own: a culprit that a cast of the model's own values gave its dtype too
            # keeps it, from those casts only (on purpose, unless an operation raises on it),
            # as it would with those lines fixed; the others go on in the model's dtype.
            converted = [
                tensor
                for tensor in culprits
                if not any(tensor is k for k in kept) and not self._keep_islands(tensor)
            ]
            if not converted:
                return result
            return run(func, args, kwargs, cast(replace, converted, low))
        if mixed and outputs and not promoted and not keeps_dtype(func, args, low):
            # Two floating dtypes in, the model's out: an operation that does not promote
            # (mm, linear, embedding), which the CPU may run and CUDA rejects.
            for tensor in mixed:
                self._record("dtype", tensor, func, model, raises=True)
        return result

    def _meets(
        self,
        func: Any,
        args: tuple[Any, ...],
        named: list[tuple[str, torch.Tensor]],
        low: torch.dtype,
    ) -> list[torch.Tensor]:
        """An operation with a tensor of the model's dtype ``low`` (or its complex form): the
        held-back findings of the floating tensors of another dtype it meets are recorded, and
        those tensors returned; a copy into a tensor of the model's dtype converts them, as a
        cast does."""
        name = func.overloadpacket.__name__
        own = (low, complex_of(low))
        if name in CASTS or not any(t.dtype in own for _, t in named):
            return []
        if name == "copy_" and args[0].dtype in own and self._code_casts(copy=True):
            for _, tensor in named[1:]:
                self.cast_back.update(self.tags.pending(tensor))
            return []
        met = []
        for _, tensor in named:
            pending = self.tags.pending(tensor)
            if pending and floating(tensor) and tensor.dtype not in own:
                self._commit(pending)
                if not self._keep_islands(tensor):
                    met.append(tensor)
        return met

    def _hold_along(
        self,
        func: Any,
        named: list[tuple[str, torch.Tensor]],
        model: list[torch.Tensor],
        result: Any,
        low: torch.dtype,
    ) -> None:
        """An operation without a tensor of the model's dtype on what a held-back finding
        promoted: the other strays it meets there would have promoted it had that finding's
        line been fixed (as the pass supposes of what it records); their findings are held back
        with it, at this operation."""
        if not any(self.tags.pending(t) and t.dtype != low for _, t in named):
            return
        outputs = [t for t in tensors_in(result) if floating(t)]
        if not outputs:
            return
        keys: set[tuple[object, ...]] = set()
        for _, tensor in named:
            stray = self._dtype_stray(tensor, low) and not self._island(tensor)
            if stray and not self.tags.pending(tensor):
                dtype = outputs[0].dtype
                keys.update(self._record("dtype", tensor, func, model, result=dtype, defer=True))
        self._held = frozenset(key for key in keys if key in self.pending)

    def _code_casts(self, *, copy: bool = False) -> bool:
        """Whether the code converts a tensor itself (``.to(x.dtype)``; with ``copy``, a copy
        into one of its tensors too), not torch inside an operation or autograd."""
        call = self.calls.call
        return call is not None and (call.cast or (copy and not call.autograd))

    def _keep_islands(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor``, whose findings are recorded, keeps its dtype as the pass goes on,
        from the casts of the model's own values that gave it that dtype too (as it would with
        the lines reported fixed); it is tagged with those casts only."""
        islands = tuple(
            site for site in self.tags.sites(tensor) if site.island and site.dtype == tensor.dtype
        )
        if islands:
            self.tags.set(tensor, Tag(self.tags.follows(tensor), islands))
        return bool(islands)

    def _commit(self, keys: frozenset[tuple[object, ...]]) -> None:
        """Record the held-back findings under ``keys``: what they promoted met the model."""
        for key in [key for key in self.pending if key in keys]:  # in the order met
            self.records.setdefault(key, self.pending.pop(key))

    def settle(self) -> None:
        """At the end of the pass (or where it stops): the held-back findings whose result was
        never converted to the model's dtype are recorded; the others were no strays."""
        self._commit(frozenset(key for key in self.pending if key not in self.cast_back))
        self.pending.clear()
        ours = sorted(
            (key for key in self.records if key in self._order), key=self._order.__getitem__
        )
        for key in ours:  # moved to the end, in the order met
            self.records[key] = self.records.pop(key)

    def returned(self, output: list[torch.Tensor]) -> None:
        """Judge the tensors the pass returns (``output``: ``copying.exchanged_tensors`` of what it
        returned), as its caller meets them: a floating tensor with a dimension left on the
        default device, or made in a dtype that would change the dtype the caller computes in
        with them (float32 beside bfloat16), beside the model's tensors is a stray (a flow's
        log-determinant that only ever met another stray in forward, the std of a distribution
        a policy returns). A 0-dim tensor is a scalar to CUDA, an integer one an index, a copy
        back to the CPU and a cast of the model's own values are on purpose: none is
        reported."""
        for tensor in output:  # the caller meets what it returns
            if tensor.dtype != self.dtype:
                self._commit(self.tags.pending(tensor))
        tensors = [t for t in output if t.dim() and floating(t)]
        model = [t for t in tensors if self.tags.follows(t)]
        if not model:
            return  # nothing of the model's beside them: what the caller does with them is its own
        low = self.dtype
        for tensor in tensors:
            sites = self.tags.sites(tensor)
            if (
                self.devices
                and not self.tags.follows(tensor)
                and any(s.host and not s.copied_back for s in sites)
            ):
                self._record("device", tensor, None, model)
            if low is None or not any(t.dtype == low for t in model):
                continue
            promoted = torch.promote_types(tensor.dtype, low)
            if promoted != low and self._dtype_stray(tensor, low) and not self._island(tensor):
                # it would turn what the caller computes with the model's tensors into promoted
                self._record("dtype", tensor, None, model, result=promoted)

    def _dtype_stray(self, tensor: torch.Tensor, low: torch.dtype) -> bool:
        """A tensor made (or cast) by the code in the pass in another dtype than ``low``: one
        that may mix. Its dtype is the code's where a site of the code gave it that dtype; what
        only torch cast (inside sdpa, under autocast), or an operation chose for its output
        (the float32 log-sum-exp sdpa returns beside a bfloat16 output), is torch's, whatever
        made its inputs (an integer index made in forward does not make floats of its dtype).
        Only a floating or complex tensor can be one: an integer or boolean tensor never
        promotes a floating operation, and an index must keep its dtype."""
        if tensor.dtype == low or not tensor.dim() or not floating(tensor):
            return False
        if tensor.is_complex() and tensor.dtype == complex_of(low):
            return False  # the model's dtype in complex form
        return any(
            not site.internal and site.dtype == tensor.dtype for site in self.tags.sites(tensor)
        )

    def _island(self, tensor: torch.Tensor) -> bool:
        """Whether the dtype of ``tensor`` comes from casts of the model's own values only: of
        the code's (torch's own casts inside an operation, ``rms_norm``'s, give it no dtype of
        the code's, as for ``_dtype_stray``)."""
        origins = [s for s in self.tags.sites(tensor) if s.dtype == tensor.dtype and not s.internal]
        return bool(origins) and all(site.island for site in origins)

    # --- tags -------------------------------------------------------------------------------------

    def _enter(self, tensor: torch.Tensor) -> None:
        """Tag a CPU tensor the pass meets for the first time: made before it, on the CPU."""
        located = self.attributes.get(id(tensor))
        if located is None:
            site = self.lines.site("entered", host=True, entered=True, dtype=tensor.dtype)
            self.foreign.add(storage_key(tensor))
        else:
            holder = located.holder_path, type(located.holder).__name__
            site = self.lines.site(
                "entered",
                holder=holder,
                host=True,
                entered=True,
                dtype=tensor.dtype,
                attribute=located.finding,
            )
        self.tags.set(tensor, Tag(False, (site,)))

    def _tag_outputs(
        self,
        func: Any,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        tensors: list[torch.Tensor],
        sources: list[torch.Tensor],
        result: Any,
    ) -> None:
        outputs = tensors_in(result)
        if not outputs:
            return
        line = self.lines.line()
        for out in outputs:
            if out not in self.made:
                self.made[out] = line
        new = [out for out in outputs if not self.tags.known(out)]
        if not new:
            return  # views and in-place results: their storage keeps its tag
        factory = name in LIFTS or not tensors
        pending: frozenset[tuple[object, ...]] = frozenset()
        follows = (
            self._placement(name, tensors)
            if factory or "device" in kwargs
            else any(self.tags.follows(t) for t in tensors)
        )
        sites: tuple[Site, ...] | None
        call = self.calls.call
        if factory:
            attribute = call.device_attribute if call is not None and not follows else ""
            sites = (
                self.lines.site(
                    name,
                    host=not follows,
                    dtype=new[0].dtype,
                    # autograd's own (prod's backward makes ones of its graph's dtype): its
                    # dtype is the graph's, which the forward's lines gave it
                    internal=call is not None and call.autograd and _by_autograd(),
                    random=name if name in RANDOM else "",
                    shaped=not self.input_dims.isdisjoint(new[0].shape),
                    written=kwargs.get("dtype") is not None,
                    device_attribute=attribute,
                    copied_back=not follows and new[0].data_ptr() in self.calls.copied,
                ),
            )
        elif name in CASTS and new[0].dtype != tensors[0].dtype:
            # A cast decides the dtype: of its input's sites, only those that left it on the
            # default device still say something about it.
            kept = tuple(s for s in self.tags.sites(tensors[0]) if s.host)
            # A cast to the dtype of another tensor (.to(x.dtype), .type_as(x)) that another
            # line gave it writes no dtype of its own: it has that line's.
            like = call.like if call is not None else None
            taken = dtype_origins(self.tags.sites(like), new[0].dtype) if like is not None else ()
            sites = merged([kept, taken or (self._cast(tensors[0], new[0].dtype),)])
            if new[0].dtype == self.dtype and self._code_casts():  # converted: no stray
                self.cast_back.update(self.tags.pending(tensors[0]))
            else:
                pending = self.tags.pending(tensors[0])
        else:  # computed: from every site of its inputs; a 0-dim input is a scalar to CUDA,
            # and makes no stray of a tensor computed with a dimensioned one (torch's sdpa turns
            # a bool mask into a float one with where(mask, scalar_tensor(0), scalar_tensor(-inf)))
            pending = self._held.union(*(self.tags.pending(t) for t in sources))
            sites = merged(self._joined(sources, new[0]))
            if sites is None:
                sites = merged(self.tags.sites(t) for t in sources)
            if floating(new[0]) and not any(floating(t) for t in tensors):
                # Floating values computed from integers (divided, times a Python float): their
                # dtype, the default one, came to be at this line, where to give them the model's;
                # torch's own code computing them (a bool mask made the query's dtype inside
                # nn.MultiheadAttention) took its dtype from what it was handed: no cause.
                internal = call is not None and call.torch
                computed = self.lines.site("computed", dtype=new[0].dtype, internal=internal)
                sites = merged([sites, (computed,)])
        for out in new:
            self.tags.set(out, Tag(follows or out.device.type != "cpu", sites or (), pending))

    def _joined(self, sources: list[torch.Tensor], result: torch.Tensor) -> list[tuple[Site, ...]]:
        """The sites of the dimensioned ``sources``; where one of them is a cast on purpose in
        the dtype of ``result`` (``t.float()`` times float32 frequencies), that cast decides the
        dtype: the others' sites in it are marked ``joined``, whose fix is to convert where the
        computation meets the model, not to give them the model's dtype, which changes nothing
        (the cast stays) and would round them (frequencies that timesteps to 999 multiply)."""
        dimensioned = [t for t in sources if t.dim()]
        dtype = result.dtype
        if not floating(result) or not any(
            floating(t) and t.dtype == dtype and self._island(t) for t in dimensioned
        ):
            return [self.tags.sites(t) for t in dimensioned]
        return [
            tuple(
                dataclasses.replace(site, joined=True)
                if site.dtype == dtype and not (site.island or site.internal)
                else site
                for site in self.tags.sites(t)
            )
            for t in dimensioned
        ]

    def _cast(self, source: torch.Tensor, dtype: torch.dtype) -> Site:
        """The site of a cast of ``source``: torch's own inside another operation; precision on
        purpose (an island) when the code casts the model's own values, floating in its dtype."""
        call = self.calls.call
        if call is None or not call.cast or call.torch:
            return self.lines.site("cast", dtype=dtype, internal=True)
        island = (
            floating(source)
            and self.tags.follows(source)
            and (self.dtype is None or source.dtype == self.dtype)
        )
        return self.lines.site("cast", dtype=dtype, island=island, written=True)

    def _placement(self, name: str, tensors: list[torch.Tensor]) -> bool:
        """Whether an operation that chooses its output's device (a factory, lifted data, a copy
        with ``device=``) made it on the model's device."""
        call = self.calls.call
        if call is None:
            # No call of torch's API is seen: data lifted by a constructor of its own
            # (torch.from_numpy, torch.FloatTensor(data)) is on the default device; anything
            # else (TorchScript code, which passes its devices unseen) cannot be told, and counts
            # as following the model, as nn.Module would not complain.
            return name not in LIFTS
        if not call.autograd:
            if call.target is not None:
                follows = call.target
            else:
                follows = call.inputs or any(self.tags.follows(t) for t in tensors)
            frame = _caller()
            if frame is not None and not is_library(frame.f_code.co_filename):
                self.memo[frame.f_code.co_filename, frame.f_lineno, name] = follows
            return follows
        if name not in LIFTS and any(self.tags.follows(t) for t in tensors):
            return True
        # Under autograd: the forward's calls are not seen. A factory of the user's code (a
        # backward written in Python, a checkpoint's forward run again) is judged as the same
        # line was in the forward pass; one of autograd's own follows the tensors it serves.
        if _by_autograd():
            return True
        frame = _caller()
        assert frame is not None  # _by_autograd
        return self.memo.get((frame.f_code.co_filename, frame.f_lineno, name), False)

    # --- findings ---------------------------------------------------------------------------------

    def bias_mix(self, args: tuple[Any, ...], bias: torch.Tensor) -> tuple[Any, ...]:
        """A convolution given an input in another floating dtype than its bias, which CUDA's
        and the CPU's convolutions refuse before any operation runs: a dtype finding, when the
        code gave the input its dtype; the pass goes on with it in the bias's dtype, as with
        that line fixed."""
        tensor = args[0]
        if (
            self.dtype is None
            or bias.dtype != self.dtype
            or not self._dtype_stray(tensor, bias.dtype)
        ):
            return args  # not a stray of the code's: the convolution raises as it would
        self._record("dtype", tensor, _CONVOLUTION, [bias], raises=True)
        with torch._C.DisableTorchFunction():
            converted = tensor.to(bias.dtype)
        self.tags.set(converted, Tag(self.tags.follows(tensor), self.tags.sites(tensor)))
        return (converted, *args[1:])

    def noop_cast(self, tensor: torch.Tensor) -> torch.Tensor:
        """A cast the code wrote to the dtype ``tensor`` has already (``t.float()`` of float32
        timesteps), which returns ``tensor`` itself: in the low-precision pass, a value of the
        model's (an input, what it computed) in another dtype than the model's has this line's
        dtype from here, as where the cast converts; what gave it that dtype before (the
        caller's float32 timesteps) no longer decides it, the cast would keep it. No cast of the
        model's own values in its dtype, it is no precision on purpose (``_cast``): a promotion
        it makes is reported. The pass goes on with a copy, as where the cast converts."""
        if self.devices or not floating(tensor) or tensor.dtype == self.dtype:
            return tensor
        if not self.tags.follows(tensor):
            return tensor
        with torch._C.DisableTorchFunction():
            copy = tensor.clone()
        kept = tuple(site for site in self.tags.sites(tensor) if site.host)
        cast = self.lines.site("cast", dtype=tensor.dtype, written=True)
        sites = merged([kept, (cast,)]) or ()
        self.tags.set(copy, Tag(True, sites, self.tags.pending(tensor)))
        return copy

    def numpy(self, tensor: torch.Tensor) -> None:
        """``.numpy()`` of ``tensor``, on the model's device: a device finding at that line."""
        if not self.devices:
            return
        site = self.lines.site("numpy", dtype=tensor.dtype)
        key = ("device", *site.key)
        if key not in self.records:
            line = site.filename, site.lineno
            self.records[key] = record(
                "device",
                site,
                tensor,
                "numpy",
                line,
                [tensor],
                self.tags.follows,
                None,
                None,
                self.lines.mode,
            )
        self._met(key)

    def _record(
        self,
        kind: Kind,
        tensor: torch.Tensor,
        func: Any,
        model: list[torch.Tensor],
        *,
        raises: bool = False,
        result: torch.dtype | None = None,
        defer: bool = False,
    ) -> list[tuple[object, ...]]:
        """Record a finding for each site ``tensor`` came from: for a device finding, each that
        left it on the default device; for a dtype finding, each that gave it its dtype (a cast
        of the model's values, on purpose, only when the operation raises); ``result``: the dtype
        ``func`` promoted to. ``func`` None: the tensor is returned (``returned``). ``defer``: a
        new finding is held back (``pending``), one held back before stays so; else a finding
        held back is recorded. Returns the keys of the findings."""
        sites = tuple(s for s in self.tags.sites(tensor) if not s.internal)
        if kind == "device":
            chosen = [s for s in sites if s.host]
        else:
            chosen = [s for s in sites if s.dtype == tensor.dtype] or list(sites)
            if not raises:
                chosen = [s for s in chosen if not s.island]
            lines: dict[object, Site] = {}  # one site of a line says where to give it the dtype
            for site in chosen:
                lines.setdefault(site.key if site.attribute else site.key[:2], site)
            chosen = list(lines.values())
        if not chosen:
            if func is None:
                return []  # returned: no site of the code's to name
            chosen = [self.lines.site("made", host=kind == "device", dtype=tensor.dtype)]
        op = RETURNED if func is None else func.overloadpacket.__name__
        op_line = None if func is None else self.lines.line()
        keys: list[tuple[object, ...]] = []
        for site in chosen:
            key = (kind, *site.key)
            keys.append(key)
            if not defer:
                self._commit(frozenset({key}))
            into = self.pending if defer and key not in self.records else self.records
            if key not in into:
                self._order.setdefault(key, len(self._order))
                into[key] = record(
                    kind,
                    site,
                    tensor,
                    op,
                    op_line or (site.filename, site.lineno),
                    model,
                    self.tags.follows,
                    self.dtype,
                    result,
                    self.lines.mode,
                )
            self._met(key)
        return keys

    def _met(self, key: tuple[object, ...]) -> None:
        """Note that this pass's mode met the stray recorded (or held back) under ``key`` too."""
        modes = (self.records[key] if key in self.records else self.pending[key]).modes
        if self.lines.mode not in modes:
            modes.append(self.lines.mode)


def _on_meta(tensor: torch.Tensor) -> bool:
    return tensor.device.type == STAND_IN.type


def _by_autograd() -> bool:
    """Whether the operation running now under autograd is autograd's own (a backward formula's
    factory), not the user's code (a backward written in Python): no frame of the user's calls
    it."""
    frame = _caller()
    return frame is None or is_library(frame.f_code.co_filename)


def _caller() -> FrameType | None:
    """The innermost frame of the code that called the operation running now: not this mode's,
    not torch's dispatch machinery."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_PLUMBING):
            return frame
        frame = frame.f_back
    return None
