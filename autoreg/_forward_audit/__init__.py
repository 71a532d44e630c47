"""Audit one forward pass for the tensors that ``.to()`` can never reach: those made in ``forward``.

Design note
-----------
Registration fixes the tensors a module stores. It cannot fix the ones ``forward`` makes on the
default device - ``torch.arange(n)``, ``torch.tensor([...])``, ``torch.zeros(...)`` without
``device=`` - nor the ones ``forward`` takes from outside the module: a module-level global, a
closure, a config object, a numpy array. Those work on the CPU and fail on the GPU, usually after
deployment. ``audit_forward`` finds them without a GPU:

1. ``copying``: it deep-copies the model (parameters go straight to the stand-in device through
   the copy's memo, so no weight is duplicated; a tensor with autograd history, kept by a
   training forward, enters as a detached copy of its value) and moves the copy with its own
   ``.to()``, so that what ``.to()`` leaves behind on the real device is left behind here too -
   on the CPU, also for a model built on meta (``strand``). The inputs are copied and moved with
   it. The caller's model, its mode, the inputs and the random number generators are left as
   they were; a tensor made before the pass (a global) that forward writes to is written on a
   copy. ``entry`` runs the copy in the mode the model is in, or in the one asked for, or in
   both, one after the other.
2. ``dispatch``: it runs one forward of the copy on the stand-in device, ``meta`` (no memory, no
   values), under a ``TorchDispatchMode`` that sees the tensor arguments of every ATen
   operation. Factory calls without ``device=`` still land on the default device: nothing
   redirects them.
3. ``rules``: each operation is judged by CUDA's rules, not by meta's (``meta @ cpu`` succeeds
   where ``cuda @ cpu`` raises): a CPU tensor with at least one dimension, next to a stand-in
   tensor, is a device finding - except in the arguments CUDA takes from the CPU on purpose
   (index tensors, ``copy_``'s source, packed-sequence lengths and batch sizes). A 0-dim CPU
   tensor is a scalar to CUDA, never a finding. After recording it, the audit moves the stray to
   the stand-in device and the pass goes on, so that one pass reports every stray.
4. ``sites``: every tensor an operation makes from nothing (a factory, data lifted by
   ``torch.tensor`` or ``torch.from_numpy``, a copy back to the CPU) is tagged with the user's
   line that made it - the first frame outside torch and autoreg - and the module whose code
   that is; what an operation computes inherits the tags of all its inputs, so that
   ``x + self.noise_std * torch.randn(x.shape)`` reports both the attribute and the ``randn``.
   A CPU tensor the pass meets untagged was made before ``forward`` (a global, a closure, a
   config object, a plain attribute ``.to()`` left behind): it is tagged with the line where it
   entered. One finding per line, kind and origin.
5. A second pass converts the copy and the floating inputs to ``bfloat16`` and reports floating
   tensors made in forward in another floating dtype that promote a ``bfloat16`` operation
   (``float32`` constants upcasting a half-precision model), or that an operation which does not
   promote (``mm``, ``linear``; meta runs them, CUDA raises) gets next to ``bfloat16`` ones, and
   tagged tensors of another dtype that make an operation raise. A dtype written in the code
   (``dtype=`` in a factory, ``.float()``, ``.to(torch.float32)``) is deliberate, not a finding.
6. ``stores``: state that forward stores on a module where ``.to()`` leaves it (``self.h = ...``
   in a plain ``nn.Module``, a kv-cache) is a ``"stored"`` finding at the line of the store.
7. ``fixes``: each fix names tensors as the code that made the stray has them (``x``,
   ``self.cell.weight``), and never calls a tensor shaped by the input a constant.

Values (``values``): meta has none. What is computed from the inputs alone is computed on the
CPU as well; any other value read is a stand-in (``False``, ``1``; ones for a copy to the CPU).
When the pass stops, ``entry`` says why: an operation meta cannot run on unknown values, an
error after stand-in values were read, or an error of the forward itself (wrong input shapes, a
bug), which raises on the CPU too.

The modules: ``entry`` (the passes and why one stops), ``copying``, ``dispatch``, ``rules``,
``sites``, ``values``, ``stores``, ``fixes`` and ``finding`` (``ForwardFinding``). The reports'
tables live in ``autoreg._report``.
"""

from .entry import LOW_PRECISION, audit_forward, audited_modes
from .finding import ForwardFinding, Kind, ModeChoice, ModeName

__all__ = [
    "LOW_PRECISION",
    "ForwardFinding",
    "Kind",
    "ModeChoice",
    "ModeName",
    "audit_forward",
    "audited_modes",
]
