"""Audit one forward pass (or a loss, a training step) for the tensors ``.to()`` can never reach.

Design note
-----------
Registration fixes the tensors a module stores. It cannot fix the ones ``forward`` makes on the
default device - ``torch.arange(n)``, ``torch.tensor([...])``, ``torch.zeros(...)`` without
``device=`` - nor the ones ``forward`` takes from outside the module: a module-level global, a
closure, a config object, a numpy array. Those work on the CPU and fail on the GPU, usually after
deployment. ``audit_forward`` finds them without a GPU, by running the real forward on the CPU,
with its values, and keeping beside each tensor where a moved model would have it.

Why real values on the CPU. The first design ran the forward on the meta device, where a factory
without ``device=`` is told apart by its device. But meta has no values, and real forwards read
them: ``torch.autograd.grad`` inside forward (energy and Hamiltonian networks) needs grad mode and
real graphs, ``torch.distributions`` validates its arguments, adaptive ODE solvers loop on values
and call ``torch.unique``, which has no meta kernel; ``torch.autocast(device_type=x.device.type)``
refuses "meta". A forward that runs on a CPU must be auditable: the meta device is kept only for
a model the caller built there (it has no values to run with).

How the devices are told apart on one device. On the CPU, ``torch.zeros(n, device=x.device)`` and
``torch.zeros(n)`` make the same tensor: what differs is the call the code wrote. Two modes see
the pass:

1. ``calls``, a ``TorchFunctionMode``, sees the forward's own calls: ``x.device`` of a tensor that
   follows the model gives a CPU device of the audit's own (known by identity), so that a call
   given it, or a tensor of the model, makes its tensors on the model's device; ``.to()``,
   ``.cuda()``, ``.cpu()`` and ``.type_as()`` make the copies a GPU would. Any other CPU device
   (``"cpu"``, ``self.device`` kept from the constructor) is the default device.
2. ``dispatch``, a ``TorchDispatchMode``, sees every ATen operation and ``tags`` each tensor, by
   its storage (views and ``nn.Parameter(t)`` share it): whether it follows the model - the
   copy's parameters, buffers and carried state, the inputs, and what is computed from them - and
   the ``sites`` it came from (the user's line that made it, cast it, or where it entered).
   ``rules``: an operation that meets a tensor left on the default device, with a dimension, next
   to one of the model's is a device finding, judged by CUDA's rules (a 0-dim CPU tensor is a
   scalar to CUDA; index tensors, a copy's source, packed-sequence lengths are taken from the
   CPU on purpose, ``rules.CPU_OK``).

Precise dtype rules. A second pass converts the copy and the floating inputs to ``bfloat16`` (the
model's own dtype is the first pass's reference: a float64 numpy array in a float32 model). A
tensor the code made or cast in another dtype is a stray when it meets the model's dtype and
promotes the operation or makes it raise (or would on CUDA: ``mm`` does not promote) - whether or
not the code wrote the dtype (``dtype=torch.double``, ``.type(torch.float)``). A cast of the
model's own values (``x.float()``, RMSNorm, softmax and rotary in float32, cast back with
``.type_as(x)``) is precision on purpose: it is reported only where it makes an operation raise.
A cast inside another operation (sdpa, autocast, rms_norm) is torch's, never a stray, and gives
no dtype of the code's. A cast to another tensor's dtype (``.to(x.dtype)``, ``.type_as(x)``)
writes none of its own: it has the sites that gave ``x`` its dtype. A promotion is held back
until what it computes meets a tensor of the model's dtype, is returned, or ends the pass
unconverted: converted by the code first (a float32 timestep embedding ``.to(x.dtype)`` before
its MLP), it is no stray. Where the CPU has no kernel for bfloat16 (CUDA has), the operation
runs in float32 and comes back in bfloat16.

Findings. ``fixes`` gives one fix per site, whatever kinds it was found for, in the names the
code there has (``x``, ``self.cell.weight``): a plain attribute gets its attribute's fix, on the
device row and the dtype row alike, and is reported once, wherever it enters. ``stores``: state
that forward stores on a module where ``.to()`` leaves it (``self.h = ...`` in a plain
``nn.Module``, a kv-cache) is a ``"stored"`` finding at the line of the store.

Copies (``copying``): the model is deep-copied and converted by its own ``.to()``, the inputs are
copied, the random number generators are kept: the caller's model, inputs and RNG are left as they
were (a global that forward writes to is written on a copy). The pass runs in the caller's grad
mode. ``step=fn`` audits ``fn(copy, *args, **kwargs)`` instead of the forward: a loss, or a
training step with its backward and optimizer.

When the pass stops (``entry``), the model given is run again on the CPU without the audit: if it
raises then too, the error is the forward's own; if not, the audit says it could not follow it.

The modules: ``entry`` (the passes and why one stops), ``copying``, ``calls``, ``dispatch``,
``tags``, ``rules``, ``sites``, ``values`` (a model built on meta: the values the inputs have),
``stores``, ``fixes`` and ``finding`` (``ForwardFinding``). The reports' tables live in
``autoreg._report``.
"""

from .entry import (
    LOW_PRECISION,
    ForwardStoppedError,
    Step,
    audit_forward,
    audited_modes,
    not_audited,
    stopped_in,
    what_runs,
)
from .finding import ForwardFinding, Kind, ModeChoice, ModeName

__all__ = [
    "LOW_PRECISION",
    "ForwardFinding",
    "ForwardStoppedError",
    "Kind",
    "ModeChoice",
    "ModeName",
    "Step",
    "audit_forward",
    "audited_modes",
    "not_audited",
    "stopped_in",
    "what_runs",
]
